-- Headless Neovim driving `kernelscope serve` through the plugin in editor-client/nvim (run by
-- tests/e2e/nvim/test_nvim_plugin.py, with `--cmd "set rtp+=<repo>/editor-client/nvim"`).
--
-- Env: E2E_PYTHON (the interpreter that runs `-m kernelscope serve`), E2E_FILE (a Python file in
-- a project), E2E_FUNC (the function to profile), E2E_OUT (the JSON written with everything
-- observed), E2E_MODE ("plugin": the full flow through the plugin's commands; "legacy": the
-- plugin's 0.8-0.10 path, forced on a newer Neovim by hiding vim.lsp.config and vim.ui.open, up to
-- :KernelscopeOpenTrace; "old": only setup(), for Neovim < 0.8). The JSON is rewritten after every
-- step, so a killed run says how far it got.
--
-- Nothing leaves the machine: vim.ui.open is replaced by a recorder, so "opening" the Perfetto URL
-- records it (the plugin's window/showDocument handler calls vim.ui.open on 0.10+). In "legacy"
-- mode the plugin runs `xdg-open URL` instead: the test puts a recording xdg-open first on PATH.

local out_path = os.getenv('E2E_OUT') or 'nvim_plugin_result.json'
local func = os.getenv('E2E_FUNC') or 'three_lines'
local mode = os.getenv('E2E_MODE') or 'plugin'
local v = vim.version()
local modern = vim.fn.has('nvim-0.11') == 1

local result = {
  nvim = string.format('%d.%d.%d', v.major, v.minor, v.patch),
  mode = mode,
  step = 'start',
  errors = {},
  notifications = {},
  echoes = {},
  opened = {},
}

local function save()
  local f = assert(io.open(out_path, 'w'))
  f:write(vim.fn.json_encode(result))
  f:close()
end

local function step(name)
  result.step = name
  save()
end

local function call(client, name, ...)
  if modern then
    return client[name](client, ...)
  end
  return client[name](...)
end

-- record what the plugin tells the user, and the URLs it opens
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(result.notifications, { message = tostring(msg), level = level or vim.NIL })
  return notify(msg, level, opts)
end
local echo = vim.api.nvim_echo
vim.api.nvim_echo = function(chunks, history, opts)
  local text = table.concat(vim.tbl_map(function(c) return c[1] end, chunks))
  if text:match('^kernelscope:') then
    table.insert(result.echoes, text)
  end
  return echo(chunks, history, opts)
end
vim.ui = vim.ui or {}
vim.ui.open = function(url)
  table.insert(result.opened, url)
  return nil, nil
end

local function notified(pattern)
  for _, n in ipairs(result.notifications) do
    if n.message:match(pattern) then
      return n
    end
  end
end

local function run_old()
  -- Neovim < 0.8: setup() must refuse with a clear message, without raising
  local ok, ret = pcall(function()
    return require('kernelscope').setup({ cmd = { os.getenv('E2E_PYTHON') or 'python3', '-m', 'kernelscope', 'serve' } })
  end)
  result.setup_raised = not ok
  if ok then
    result.setup_returned = ret
  else
    result.setup_returned = tostring(ret)
  end
  step('setup')
  local cmd_ok, cmd_err = pcall(vim.cmd, 'KernelscopeProfile')
  result.command_raised = not cmd_ok
  result.command_error = cmd_ok and vim.NIL or tostring(cmd_err)
  step('done')
end

local function run_plugin(legacy)
  if legacy then
    -- what 0.8-0.10 lack: the plugin must take its FileType + vim.lsp.start path and xdg-open
    vim.lsp.config = nil
    vim.ui.open = nil
  end
  local file = assert(os.getenv('E2E_FILE'), 'E2E_FILE is not set')
  local python = assert(os.getenv('E2E_PYTHON'), 'E2E_PYTHON is not set')
  local done
  vim.api.nvim_create_autocmd('User', {
    pattern = 'KernelscopeProfileDone',
    callback = function(args)
      done = args.data
    end,
  })
  local t0 = (vim.uv or vim.loop).hrtime()
  local function seconds()
    return ((vim.uv or vim.loop).hrtime() - t0) / 1e9
  end

  result.setup_returned = require('kernelscope').setup({
    cmd = { python, '-m', 'kernelscope', 'serve' },
    settings = { device = 'cpu', schedule = { wait = 0, warmup = 1, active = 2 }, inputs = {} },
    inlay_hints = true,
  })
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
  local client
  local attached = vim.wait(20000, function()
    client = get_clients({ bufnr = bufnr, name = 'kernelscope' })[1]
    return client ~= nil and client.initialized == true
  end, 20)
  if not attached then
    error('the plugin did not start and attach the server within 20 s')
  end
  result.attach_seconds = seconds()
  -- which path started the client: the 0.8-0.10 one leaves a FileType autocmd in this group
  local has_group, autocmds = pcall(vim.api.nvim_get_autocmds, { group = 'kernelscope.start' })
  result.filetype_autocmds = has_group and #autocmds or 0
  result.root_dir = client.config.root_dir or client.root_dir or vim.NIL
  result.server_name = client.server_info and client.server_info.name or vim.NIL
  result.commands = vim.tbl_filter(function(name)
    return name:match('^Kernelscope')
  end, vim.tbl_keys(vim.api.nvim_get_commands({})))
  table.sort(result.commands)
  step('attached')

  local def_line
  for i, l in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if l:match('^def ' .. func .. '%(') then
      def_line = i
    end
  end
  result.def_line = def_line - 1

  -- :KernelscopeProfile with the cursor inside the function's body
  vim.api.nvim_win_set_cursor(0, { def_line + 2, 6 })
  local t_profile = seconds()
  vim.cmd('KernelscopeProfile')
  if not vim.wait(45000, function() return done ~= nil end, 20) then
    error('no KernelscopeProfileDone within 45 s')
  end
  result.profile_seconds = seconds() - t_profile
  result.profile = { qualname = done.qualname, result = done.result or vim.NIL, message = done.message }
  step('profiled')

  -- the verdict on the def line, as Neovim shows it
  local function kernelscope_diagnostics()
    local out = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      local code = d.code or vim.tbl_get(d, 'user_data', 'lsp', 'code')
      if d.source == 'kernelscope' or (type(code) == 'string' and code:match('^KS')) then
        table.insert(out, { lnum = d.lnum, code = code or vim.NIL, severity = d.severity, message = d.message })
      end
    end
    return out
  end
  vim.wait(10000, function()
    for _, d in ipairs(kernelscope_diagnostics()) do
      if d.code == 'KS100' then
        return true
      end
    end
    return false
  end, 20)
  result.diagnostics = kernelscope_diagnostics()
  step('diagnostics')

  -- hover on the def line, through the plugin's client
  local hover = call(client, 'request_sync', 'textDocument/hover', {
    textDocument = { uri = uri },
    position = { line = def_line - 1, character = 5 },
  }, 10000, bufnr)
  local contents = hover and hover.result and hover.result.contents
  result.hover = contents and (contents.value or contents) or vim.NIL
  step('hover')

  -- the code lenses the plugin keeps fresh (vim.lsp.codelens.get: what Neovim displays)
  local function lens_titles()
    return vim.tbl_map(function(l)
      return l.command and l.command.title or ''
    end, vim.lsp.codelens.get(bufnr))
  end
  -- wait up to `ms` for a lens whose title matches `pattern`
  local function wait_for_lens(ms, pattern)
    vim.wait(ms, function()
      for _, t in ipairs(lens_titles()) do
        if t:match(pattern) then
          return true
        end
      end
      return false
    end, 20)
  end
  wait_for_lens(10000, 'bound')
  result.code_lens = lens_titles()
  result.inlay_hints_enabled = vim.lsp.inlay_hint and vim.lsp.inlay_hint.is_enabled({ bufnr = bufnr }) or vim.NIL
  step('code lens')

  -- :KernelscopeOpenTrace: the server asks to show the Perfetto URL; vim.ui.open records it
  vim.cmd('KernelscopeOpenTrace')
  vim.wait(15000, function()
    return notified('^kernelscope: opened') ~= nil and (legacy or #result.opened > 0)
  end, 20)
  step('open trace')
  if legacy then
    call(client, 'stop')
    result.stopped = vim.wait(10000, function() return call(client, 'is_stopped') end, 20)
    step('done')
    return
  end

  -- :KernelscopeReport: the report text in a scratch buffer
  vim.cmd('KernelscopeReport')
  local report_buf
  vim.wait(10000, function()
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_get_name(b):match('^kernelscope://report/') then
        report_buf = b
        return true
      end
    end
    return false
  end, 20)
  if report_buf then
    result.report = {
      name = vim.api.nvim_buf_get_name(report_buf),
      buftype = vim.bo[report_buf].buftype,
      text = table.concat(vim.api.nvim_buf_get_lines(report_buf, 0, -1, false), '\n'),
    }
    vim.cmd('close')
  else
    result.report = vim.NIL
  end
  step('report')

  -- the what-if loop: the "Try torch.compile" code action the run's verdict offers, executed
  -- through Neovim's client, lands as KS801 on the def line
  local at = { line = def_line, character = 6 }
  local actions = call(client, 'request_sync', 'textDocument/codeAction', {
    textDocument = { uri = uri },
    range = { start = at, ['end'] = at },
    context = { diagnostics = {} },
  }, 10000, bufnr)
  local try_action
  result.try_titles = {}
  for _, a in ipairs(actions and actions.result or {}) do
    table.insert(result.try_titles, a.title)
    if a.title:match('^Try torch%.compile on') then
      try_action = a
    end
  end
  if try_action then
    local cmd = try_action.command
    local reply = call(client, 'request_sync', 'workspace/executeCommand', {
      command = cmd.command,
      arguments = cmd.arguments,
    }, 180000, bufnr)
    result.try_reply = reply and reply.result or vim.NIL
    vim.wait(10000, function()
      for _, d in ipairs(kernelscope_diagnostics()) do
        if d.code == 'KS801' then
          return true
        end
      end
      return false
    end, 20)
    result.try_diagnostics = vim.tbl_filter(function(d) return d.code == 'KS801' end, kernelscope_diagnostics())
  end
  step('try')

  -- a second run, started from the code-action menu (Neovim's own vim.lsp.buf.code_action, not
  -- the plugin's command): with no buffer event, its lens shows once kernelscope/runFinished
  -- arrives (Neovim 0.11 does not take workspace/codeLens/refresh)
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { def_line + 2, 6 })
  vim.lsp.buf.code_action({
    apply = true,
    filter = function(a)
      return a.title == 'Profile `' .. func .. '`'
    end,
  })
  wait_for_lens(45000, ' vs ')
  result.code_lens_after_action = lens_titles()
  step('code action run')

  -- a third profile, then :KernelscopeCompare: the per-op diff against the second run
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { def_line + 2, 6 })
  done = nil
  vim.cmd('KernelscopeProfile')
  vim.wait(45000, function() return done ~= nil end, 20)
  vim.cmd('KernelscopeCompare')
  local diff_buf
  vim.wait(10000, function()
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_get_name(b):match('^kernelscope://diff/') then
        diff_buf = b
        return true
      end
    end
    return false
  end, 20)
  result.compare = diff_buf and table.concat(vim.api.nvim_buf_get_lines(diff_buf, 0, -1, false), '\n') or vim.NIL
  if diff_buf then
    vim.cmd('close')
  end
  vim.api.nvim_set_current_buf(bufnr)
  wait_for_lens(10000, ' vs ')
  result.code_lens_after = lens_titles()
  step('compare')

  -- :KernelscopeWillFit 64 on a function without an input provider: the server's answer, as a
  -- warning naming what is missing
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { def_line + 2, 6 })
  vim.cmd('KernelscopeWillFit 64')
  vim.wait(30000, function() return notified('^kernelscope: three_lines: .*input provider') ~= nil end, 20)
  local fit = notified('^kernelscope: three_lines: .*input provider')
  result.will_fit = fit and fit.message or vim.NIL
  step('will fit')

  -- :KernelscopeProfile with options, cancelled by :KernelscopeCancel once it is running
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { def_line + 2, 6 })
  done = nil
  local echoes_before = #result.echoes
  vim.cmd('KernelscopeProfile active=100000 timeout=60')
  vim.wait(15000, function()
    for i = echoes_before + 1, #result.echoes do
      if result.echoes[i]:match('active') then
        return true
      end
    end
    return false
  end, 20)
  local t_cancel = seconds()
  vim.cmd('KernelscopeCancel')
  vim.wait(15000, function() return done ~= nil end, 20)
  result.cancel = {
    seconds = seconds() - t_cancel,
    message = done and done.message or vim.NIL,
  }
  step('cancel')

  -- an edit above the function (7 lines, as a quick fix's stub would add): Neovim sends the
  -- change, and the diagnostics move with the function
  vim.api.nvim_set_current_buf(bufnr)
  local added = {}
  for i = 1, 7 do
    added[i] = '# added line ' .. i
  end
  vim.api.nvim_buf_set_lines(bufnr, def_line - 1, def_line - 1, false, added)
  vim.wait(10000, function()
    for _, d in ipairs(kernelscope_diagnostics()) do
      if d.code == 'KS100' and d.lnum == def_line - 1 + 7 then
        return true
      end
    end
    return false
  end, 20)
  result.diagnostics_after_edit = kernelscope_diagnostics()
  step('edit above')

  -- :checkhealth kernelscope
  vim.cmd('checkhealth kernelscope')
  result.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  step('health')

  call(client, 'stop')
  result.stopped = vim.wait(10000, function() return call(client, 'is_stopped') end, 20)
  step('done')
end

local ok, err
if mode == 'old' then
  ok, err = pcall(run_old)
else
  ok, err = pcall(run_plugin, mode == 'legacy')
end
if not ok then
  table.insert(result.errors, tostring(err))
  local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
  if get_clients then
    for _, c in pairs(get_clients()) do
      pcall(call, c, 'stop', true)
    end
  end
  save()
  vim.cmd('cquit 1')
else
  save()
  vim.cmd('qall!')
end
