--- kernelscope.nvim: Neovim as a client of `kernelscope serve` (torch.profiler in your editor).
---
---   require('kernelscope').setup({ cmd = { 'python3', '-m', 'kernelscope', 'serve' } })
---
--- Neovim 0.11+: vim.lsp.config('kernelscope', ...) + vim.lsp.enable('kernelscope').
--- Neovim 0.8 to 0.10: a FileType autocmd that calls vim.lsp.start.
--- Neovim 0.7 and older: setup() says that it needs 0.8 and does nothing else.
---
--- Commands: :KernelscopeProfile [key=value ...], :KernelscopeOpenTrace, :KernelscopeReport,
--- :KernelscopeCancel. Health: :checkhealth kernelscope. See editor-client/nvim/README.md.

local M = {}

local NAME = 'kernelscope'
local PROFILE = 'kernelscope.profile'
local OPEN_TRACE = 'kernelscope.openTrace'
local LAST_REPORT = 'kernelscope.lastReport'
local COMPARE = 'kernelscope.compare'
local MEMORY_FIT = 'kernelscope.memoryFit'
local REQUEST_CANCELLED = -32800
local levels = vim.log.levels
local modern = vim.fn.has('nvim-0.11') == 1

--- The options of setup(); each can be overridden.
M.defaults = {
  -- how to start the server: kernelscope must be importable by this Python
  cmd = { 'python3', '-m', 'kernelscope', 'serve' },
  -- the `kernelscope` settings section (device, schedule, worker.python, timeout, ...)
  settings = {},
  filetypes = { 'python' },
  -- the first marker found upwards from the file decides the project root
  root_markers = { 'pyproject.toml', 'setup.py', '.git' },
  -- extra client capabilities, merged into Neovim's (e.g. from your completion plugin)
  capabilities = nil,
  -- echo the server's progress ("Profiling fn: warmup 1/3 (35%)")
  progress = true,
  -- show code lenses ("▶ Profile", the last run's headline) and keep them fresh
  codelens = true,
  -- turn on inlay hints for attached buffers (0.10+): each line's share of the time.
  -- This shows every server's inlay hints in those buffers, not only kernelscope's.
  inlay_hints = false,
}

--- The options in force after setup() (nil before).
M.config = nil

local running = {} -- executeCommand request id -> { client, qualname } of each profile in flight
local progress_titles = {} -- progress token -> title of its `begin`

local function notify(msg, level)
  vim.notify('kernelscope: ' .. msg, level or levels.INFO)
end

local function version_string()
  local v = vim.version()
  return string.format('%d.%d.%d', v.major, v.minor, v.patch)
end

-- client methods: client:m(...) on 0.11+ (where client.m(...) is deprecated), client.m(...) before
local function call(client, method, ...)
  if modern then
    return client[method](client, ...)
  end
  return client[method](...)
end

local function get_clients(filter)
  return (vim.lsp.get_clients or vim.lsp.get_active_clients)(filter)
end

--- The kernelscope client attached to `bufnr`, or nil after saying why there is none.
local function attached_client(bufnr)
  local client = get_clients({ bufnr = bufnr, name = NAME })[1]
  if not client then
    notify('not attached to this buffer (a Python file? see :checkhealth kernelscope)', levels.WARN)
  end
  return client
end

-- settings ---------------------------------------------------------------------------------------

--- A copy without empty tables: Neovim encodes `{}` as a JSON list, and every kernelscope setting
--- that is a table is an object (an empty one means "the default" anyway).
local function prune(value)
  if type(value) ~= 'table' then
    return value
  end
  local out = {}
  for k, v in pairs(value) do
    v = prune(v)
    if not (type(v) == 'table' and next(v) == nil) then
      out[k] = v
    end
  end
  return out
end

local function lookup(tbl, section)
  if section == nil or section == '' then
    return tbl
  end
  local value = tbl
  for key in section:gmatch('[^.]+') do
    if type(value) ~= 'table' then
      return nil
    end
    value = value[key]
  end
  return value
end

-- handlers for the server's requests and notifications ------------------------------------------

--- Open a URL with the system's opener: vim.ui.open on 0.10+, else open/xdg-open/rundll32.
--- Returns true, or false and why.
local function open_url(url)
  if vim.ui.open then
    local _, err = vim.ui.open(url)
    if err then
      return false, err
    end
    return true
  end
  local cmd
  if vim.fn.has('mac') == 1 then
    cmd = { 'open', url }
  elseif vim.fn.has('win32') == 1 then
    cmd = { 'rundll32', 'url.dll,FileProtocolHandler', url }
  else
    cmd = { 'xdg-open', url }
  end
  if vim.fn.executable(cmd[1]) == 0 then
    return false, cmd[1] .. ' not found'
  end
  if vim.fn.jobstart(cmd, { detach = true }) <= 0 then
    return false, 'could not start ' .. cmd[1]
  end
  return true
end

--- window/showDocument: external URIs (the Perfetto link) go to the system's opener; anything
--- else to Neovim's own handler.
local function show_document(err, params, ctx, config)
  if params and params.external then
    local ok, why = open_url(params.uri)
    if ok then
      return { success = true }
    end
    notify(string.format('cannot open %s: %s', params.uri, why), levels.WARN)
    return { success = false }
  end
  local default = vim.lsp.handlers['window/showDocument']
  if default then
    return default(err, params, ctx, config)
  end
  return { success = false }
end

--- workspace/configuration, answered from setup()'s settings (the `kernelscope` section).
local function configuration(root)
  return function(_, params)
    local result = {}
    for _, item in ipairs((params and params.items) or {}) do
      local value = lookup(root, item.section)
      table.insert(result, value == nil and vim.NIL or value)
    end
    return result
  end
end

--- $/progress: Neovim's own handling, then an echo of the stage.
local function progress(err, params, ctx, config)
  local default = vim.lsp.handlers['$/progress']
  if default then
    default(err, params, ctx, config)
  end
  local value = params and params.value
  if not (M.config and M.config.progress) or type(value) ~= 'table' then
    return
  end
  if value.kind == 'begin' then
    progress_titles[params.token] = value.title
  end
  local title = progress_titles[params.token] or NAME
  if value.kind == 'end' then
    progress_titles[params.token] = nil
  end
  local text = string.format('kernelscope: %s: %s', title, value.message or '')
  if value.percentage then
    text = text .. string.format(' (%d%%)', value.percentage)
  end
  vim.schedule(function()
    vim.api.nvim_echo({ { text } }, false, {})
  end)
end

-- code lenses and inlay hints ---------------------------------------------------------------------

local function refresh_lenses(bufnr)
  if not (M.config and M.config.codelens) or not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  -- 0.10+ take { bufnr }; 0.8/0.9 refresh the current buffer
  vim.api.nvim_buf_call(bufnr, function()
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end)
end

--- kernelscope/runFinished (after every run, however it was started: the code-action menu, a
--- lens, a command): refresh the lenses of the client's buffers. Neovim 0.11 does not advertise
--- workspace.codeLens.refreshSupport, so the server's refresh request never reaches it.
local function run_finished(_, _, ctx)
  local client_id = ctx and ctx.client_id
  vim.schedule(function()
    local client = client_id and vim.lsp.get_client_by_id(client_id)
    local buffers = client and vim.tbl_keys(client.attached_buffers or {}) or {}
    for _, bufnr in ipairs(buffers) do
      refresh_lenses(bufnr)
    end
  end)
end

local function on_attach(client, bufnr)
  if M.config.codelens then
    local group = vim.api.nvim_create_augroup('kernelscope.codelens', { clear = false })
    vim.api.nvim_clear_autocmds({ group = group, buffer = bufnr })
    vim.api.nvim_create_autocmd({ 'BufEnter', 'InsertLeave', 'BufWritePost' }, {
      group = group,
      buffer = bufnr,
      callback = function()
        refresh_lenses(bufnr)
      end,
    })
    refresh_lenses(bufnr)
  end
  if M.config.inlay_hints and vim.lsp.inlay_hint and client.server_capabilities.inlayHintProvider then
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
  end
end

-- starting the client -----------------------------------------------------------------------------

local function capabilities(extra)
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.window = caps.window or {}
  caps.window.workDoneProgress = true
  caps.window.showDocument = { support = true } -- our handler above
  caps.workspace = caps.workspace or {}
  caps.workspace.configuration = true -- answered by our handler above
  return vim.tbl_deep_extend('force', caps, extra or {})
end

--- The client configuration shared by both ways of starting it.
local function client_config(opts)
  local section = prune(opts.settings or {})
  local root = { kernelscope = next(section) and section or nil }
  return {
    name = NAME,
    cmd = opts.cmd,
    -- pushed by Neovim with didChangeConfiguration after initialize (only when not empty)
    settings = root,
    capabilities = capabilities(opts.capabilities),
    handlers = {
      ['window/showDocument'] = show_document,
      ['workspace/configuration'] = configuration(root),
      ['$/progress'] = progress,
      ['kernelscope/runFinished'] = run_finished,
    },
  }
end

--- The project root of `fname` (0.8 to 0.10): the first marker found upwards, else its folder.
local function find_root(fname, markers)
  local dir = vim.fs.dirname(fname)
  for _, marker in ipairs(markers) do
    local found = vim.fs.find(marker, { path = dir, upward = true })[1]
    if found then
      return vim.fs.dirname(found)
    end
  end
  return dir
end

local function start_legacy(base, opts, bufnr)
  local fname = vim.api.nvim_buf_get_name(bufnr)
  if vim.bo[bufnr].buftype ~= '' or fname == '' then
    return
  end
  local config = vim.tbl_extend('force', base, { root_dir = find_root(fname, opts.root_markers) })
  -- 0.8.0's vim.lsp.start attaches the current buffer, whatever opts.bufnr says
  vim.api.nvim_buf_call(bufnr, function()
    vim.lsp.start(config, { bufnr = bufnr })
  end)
end

local function enable(opts)
  local base = client_config(opts)
  if vim.lsp.config and vim.lsp.enable then -- 0.11+
    vim.lsp.config(
      NAME,
      vim.tbl_extend('force', base, { filetypes = opts.filetypes, root_markers = opts.root_markers })
    )
    vim.lsp.enable(NAME)
    return
  end
  local group = vim.api.nvim_create_augroup('kernelscope.start', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = opts.filetypes,
    callback = function(args)
      start_legacy(base, opts, args.buf)
    end,
  })
  -- buffers opened before setup() (e.g. when a plugin manager loads us on FileType)
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(opts.filetypes, vim.bo[bufnr].filetype) then
      start_legacy(base, opts, bufnr)
    end
  end
end

-- commands ----------------------------------------------------------------------------------------

--- workspace/executeCommand; `on_result(result)` on success, a message on an error.
local function execute(client, bufnr, command, arguments, on_result)
  return call(client, 'request', 'workspace/executeCommand', { command = command, arguments = arguments },
    function(err, result)
      if err then
        notify(string.format('%s failed: %s', command, err.message or vim.inspect(err)), levels.ERROR)
        return
      end
      on_result(result)
    end, bufnr)
end

local function profiled(bufnr, qualname, err, result)
  local text, level
  if (err and err.code == REQUEST_CANCELLED) or (type(result) == 'table' and result.cancelled) then
    text, level = qualname .. ': cancelled', levels.WARN
  elseif err then
    text, level = qualname .. ' failed: ' .. (err.message or vim.inspect(err)), levels.ERROR
  elseif type(result) == 'table' and result.ok then
    local summary = type(result.summary) == 'string' and result.summary ~= '' and result.summary
    text, level = qualname .. ': ' .. (summary or 'done'), levels.INFO
  else
    local why = type(result) == 'table' and type(result.error) == 'table' and result.error.message
    text, level = qualname .. ' failed: ' .. (why or vim.inspect(result)), levels.ERROR
  end
  notify(text, level)
  refresh_lenses(bufnr)
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'KernelscopeProfileDone',
    modeline = false,
    data = { bufnr = bufnr, qualname = qualname, result = result, error = err, message = text },
  })
end

local function find_profile_action(actions)
  for _, action in ipairs(actions or {}) do
    local command = type(action.command) == 'table' and action.command or action
    if command.command == PROFILE and type(action.title) == 'string'
      and action.title:match('^Profile `') then
      return command
    end
  end
end

--- Parse `key=value` words (numbers become numbers) into profile options.
local function parse_options(words)
  local options = {}
  for _, word in ipairs(words or {}) do
    local key, value = word:match('^([%w_]+)=(.+)$')
    if not key then
      return nil, 'expected key=value, got ' .. word
    end
    options[key] = tonumber(value) or value
  end
  return options
end

--- The server's "Profile `qualname`" command at the cursor (its code actions there), passed to
--- `on_command(command)`; a warning when there is no function at the cursor.
local function profile_command_at_cursor(client, bufnr, on_command)
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {} }
  call(client, 'request', 'textDocument/codeAction', params, function(err, actions)
    if err then
      notify('code actions failed: ' .. (err.message or vim.inspect(err)), levels.ERROR)
      return
    end
    local command = find_profile_action(actions)
    if not command then
      notify('no function at the cursor', levels.WARN)
      return
    end
    on_command(command)
  end, bufnr)
end

--- Profile the function at the cursor: ask the server for the code actions there and run its
--- "Profile `qualname`" one (so the qualname comes from the server). `options` may set device,
--- wait, warmup, active, timeout.
function M.profile(options)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = attached_client(bufnr)
  if not client then
    return
  end
  profile_command_at_cursor(client, bufnr, function(command)
    local arguments = vim.deepcopy(command.arguments)
    if options and next(options) then
      arguments[3] = options
    end
    local qualname = arguments[2]
    notify('profiling ' .. qualname .. ' ...')
    local id
    local ok
    ok, id = call(client, 'request', 'workspace/executeCommand',
      { command = PROFILE, arguments = arguments }, function(perr, result)
        if not running[id] then
          return -- cancelled: already reported
        end
        running[id] = nil
        profiled(bufnr, qualname, perr, result)
      end, bufnr)
    if ok then
      running[id] = { client = client, bufnr = bufnr, qualname = qualname }
    end
  end)
end

--- Cancel every profile in flight ($/cancelRequest: the server stops the job and replaces its
--- worker). Reported here: Neovim drops the handler of a request it cancelled.
function M.cancel()
  if next(running) == nil then
    notify('no profile is running')
    return
  end
  for id, job in pairs(running) do
    running[id] = nil
    call(job.client, 'cancel_request', id)
    profiled(job.bufnr, job.qualname, { code = REQUEST_CANCELLED, message = 'cancelled' }, nil)
  end
end

--- (uri, {line, character}) of the cursor: the run of the function there, else the file's last.
local function cursor_arguments(client)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  return { params.textDocument.uri, params.position }
end

--- Open the last run's trace in Perfetto (the server asks us to open the URL; see show_document).
function M.open_trace()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = attached_client(bufnr)
  if not client then
    return
  end
  execute(client, bufnr, OPEN_TRACE, cursor_arguments(client), function(result)
    if type(result) ~= 'table' or not result.ok then
      local path = type(result) == 'table' and result.path or '?'
      notify('cannot serve the trace; load it in https://ui.perfetto.dev: ' .. path, levels.WARN)
    elseif result.shown then
      notify('opened ' .. result.url)
    else
      notify(string.format('open %s (trace: %s)', result.url, result.path))
    end
  end)
end

--- Text in a read-only scratch buffer named `name` (replacing one of that name).
local function scratch(name, text)
  local old = vim.fn.bufnr(name)
  if old ~= -1 then
    vim.api.nvim_buf_delete(old, { force = true })
  end
  vim.cmd('new')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_name(buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text or '', '\n', { plain = true }))
  vim.bo[buf].modifiable = false
end

--- The last run against the one before it (the per-op diff), in a scratch buffer.
function M.compare()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = attached_client(bufnr)
  if not client then
    return
  end
  execute(client, bufnr, COMPARE, cursor_arguments(client), function(result)
    scratch('kernelscope://diff/' .. tostring(result.previous_run_id) .. '-' .. tostring(result.run_id), result.text)
  end)
end

--- The last run's report as text, in a scratch buffer.
function M.report()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = attached_client(bufnr)
  if not client then
    return
  end
  execute(client, bufnr, LAST_REPORT, cursor_arguments(client), function(result)
    scratch('kernelscope://report/' .. tostring(result.run_id), result.text)
  end)
end

--- "Will batch N fit?" for the function at the cursor: the memory forecast (the input provider
--- at a few batch sizes, each in a fresh worker); the answer as a message, the forecast in a
--- scratch buffer.
function M.will_fit(batch)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = attached_client(bufnr)
  if not client then
    return
  end
  profile_command_at_cursor(client, bufnr, function(command)
    local uri, qualname = command.arguments[1], command.arguments[2]
    notify(string.format('will batch %d of %s fit? measuring ...', batch, qualname))
    execute(client, bufnr, MEMORY_FIT, { uri, qualname, { batch = batch } }, function(result)
      if type(result) ~= 'table' or not result.ok then
        local why = type(result) == 'table' and type(result.error) == 'table' and result.error.message
        notify(qualname .. ': ' .. (why or 'cancelled'), levels.WARN)
        return
      end
      notify(qualname .. ': ' .. tostring(result.answer))
      scratch('kernelscope://memory/' .. qualname .. '-' .. tostring(batch), result.text)
    end)
  end)
end

local function create_commands(too_old)
  if not vim.api.nvim_create_user_command then -- before 0.7
    return
  end
  local function define(name, fn, opts)
    vim.api.nvim_create_user_command(name, function(args)
      if too_old then
        notify(too_old, levels.ERROR)
        return
      end
      fn(args)
    end, vim.tbl_extend('force', { force = true }, opts))
  end
  define('KernelscopeProfile', function(args)
    local options, err = parse_options(args.fargs)
    if not options then
      notify(err, levels.ERROR)
      return
    end
    M.profile(options)
  end, {
    nargs = '*',
    desc = 'kernelscope: profile the function at the cursor [device=cpu wait=1 warmup=3 active=5 timeout=120]',
    complete = function()
      return { 'device=', 'wait=', 'warmup=', 'active=', 'timeout=' }
    end,
  })
  define('KernelscopeOpenTrace', M.open_trace, { desc = 'kernelscope: open the last trace in Perfetto' })
  define('KernelscopeReport', M.report, { desc = 'kernelscope: the last report, in a scratch buffer' })
  define('KernelscopeCompare', M.compare, { desc = 'kernelscope: the last run against the previous one' })
  define('KernelscopeCancel', M.cancel, { desc = 'kernelscope: cancel the profiles in flight' })
  define('KernelscopeWillFit', function(args)
    local batch = tonumber(args.args)
    if not batch or batch < 1 or batch % 1 ~= 0 then
      notify('give the batch size N: :KernelscopeWillFit 64', levels.ERROR)
      return
    end
    M.will_fit(batch)
  end, { nargs = 1, desc = 'kernelscope: will batch N of the function at the cursor fit in memory?' })
end

--- Configure and enable the client; see M.defaults for the options.
function M.setup(opts)
  if not vim.lsp.start or vim.fn.has('nvim-0.8') == 0 then
    local too_old = string.format(
      'needs Neovim 0.8 or newer (vim.lsp.start); this is Neovim %s. Upgrade Neovim to use the plugin.',
      version_string())
    notify(too_old, levels.ERROR)
    create_commands(too_old)
    return false
  end
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  -- lists are replaced, not merged
  for _, key in ipairs({ 'cmd', 'filetypes', 'root_markers' }) do
    if opts and opts[key] then
      M.config[key] = opts[key]
    end
  end
  vim.api.nvim_create_autocmd('LspAttach', {
    group = vim.api.nvim_create_augroup('kernelscope.attach', { clear = true }),
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == NAME then
        on_attach(client, args.buf)
      end
    end,
  })
  enable(M.config)
  create_commands(nil)
  return true
end

return M
