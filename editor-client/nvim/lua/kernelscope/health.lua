--- :checkhealth kernelscope — Neovim's version, the server command, whether the server starts and
--- answers `initialize`, the attached clients, torch in the worker's Python, the URL opener.

local M = {}

-- 0.10+: vim.health.start/ok/...; 0.8/0.9: vim.health.report_start/...; 0.7: require('health')
local health = vim.health or require('health')
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local info = health.info or health.report_info
local warn = health.warn or health.report_warn
local fail = health.error or health.report_error

--- `cmd` is `<python> -m kernelscope serve`: its Python is the server's.
local function server_python(cmd)
  if cmd[2] == '-m' and cmd[3] == 'kernelscope' then
    return cmd[1]
  end
end

--- Run argv; its output (trimmed) and whether it exited 0.
local function run(argv)
  local out = vim.fn.system(argv)
  return vim.trim(out or ''), vim.v.shell_error == 0
end

--- Start `cmd`, send `initialize`, return the result (or nil and why), then shutdown and exit.
local function try_initialize(cmd, timeout_ms)
  local chunks, errors = {}, {}
  local ok_start, job = pcall(vim.fn.jobstart, cmd, {
    on_stdout = function(_, data)
      table.insert(chunks, table.concat(data, '\n'))
    end,
    on_stderr = function(_, data)
      table.insert(errors, table.concat(data, '\n'))
    end,
  })
  if not ok_start or job <= 0 then
    return nil, 'could not start it: ' .. tostring(job)
  end
  local function send(message)
    local body = vim.json.encode(message)
    vim.fn.chansend(job, string.format('Content-Length: %d\r\n\r\n%s', #body, body))
  end
  local function response(id)
    local stream = table.concat(chunks)
    local pos = 1
    while true do
      -- headers end with an empty line; pygls sends Content-Type too
      local s, e, length = stream:find('Content%-Length: (%d+).-\r\n\r\n', pos)
      if not s then
        return nil
      end
      local body = stream:sub(e + 1, e + tonumber(length))
      if #body < tonumber(length) then
        return nil
      end
      local decoded_ok, decoded = pcall(vim.json.decode, body)
      if decoded_ok and type(decoded) == 'table' and decoded.id == id then
        return decoded
      end
      pos = e + tonumber(length) + 1
    end
  end
  send({
    jsonrpc = '2.0',
    id = 1,
    method = 'initialize',
    params = { processId = vim.fn.getpid(), rootUri = vim.NIL, capabilities = vim.empty_dict() },
  })
  local reply
  vim.wait(timeout_ms, function()
    reply = response(1)
    return reply ~= nil or vim.fn.jobwait({ job }, 0)[1] ~= -1
  end, 50)
  if reply then
    send({ jsonrpc = '2.0', id = 2, method = 'shutdown' })
    vim.wait(3000, function()
      return response(2) ~= nil
    end, 50)
    send({ jsonrpc = '2.0', method = 'exit' })
  end
  if vim.fn.jobwait({ job }, 3000)[1] == -1 then
    vim.fn.jobstop(job)
  end
  if not reply then
    local stderr = vim.trim(table.concat(errors))
    return nil, 'no answer to initialize' .. (stderr ~= '' and (': ' .. stderr:sub(-400)) or '')
  end
  if reply.error then
    return nil, 'initialize failed: ' .. vim.inspect(reply.error)
  end
  return reply.result
end

function M.check()
  start('kernelscope')
  local v = vim.version()
  local version = string.format('%d.%d.%d', v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.8') == 0 or not vim.lsp.start then
    fail('Neovim ' .. version .. ' is too old: kernelscope.nvim needs 0.8 or newer')
    return
  end
  ok(string.format('Neovim %s (%s)', version,
    vim.lsp.enable and 'vim.lsp.config + vim.lsp.enable' or 'vim.lsp.start on FileType'))

  local ks = require('kernelscope')
  local config = ks.config
  if not config then
    warn("setup() has not been called: require('kernelscope').setup({...})")
    config = ks.defaults
  end
  local cmd = config.cmd
  if vim.fn.executable(cmd[1]) == 0 then
    fail(cmd[1] .. ' (cmd[1]) is not an executable', { 'set cmd = { "/path/to/python", "-m", "kernelscope", "serve" }' })
    return
  end
  info('cmd: ' .. table.concat(cmd, ' '))

  local python = server_python(cmd)
  if python then
    local out, fine = run({ python, '-c', 'import kernelscope, sys; print(kernelscope.__version__, sys.executable)' })
    if fine then
      ok('kernelscope ' .. out)
    else
      fail('kernelscope is not importable by ' .. python .. ': ' .. out:sub(-300),
        { 'install kernelscope into it: ' .. python .. ' -m pip install -e <kernelscope checkout>',
          'or set cmd to a Python that has it' })
      return
    end
  end

  local result, why = try_initialize(cmd, 20000)
  if result then
    local server = result.serverInfo or {}
    ok(string.format('the server starts and answers initialize: %s %s', server.name or '?', server.version or ''))
  else
    fail('the server did not initialize: ' .. why)
  end

  local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
  local clients = get_clients({ name = 'kernelscope' })
  if #clients == 0 then
    info('no kernelscope client is running (open a Python file)')
  end
  for _, client in ipairs(clients) do
    local root = client.config and client.config.root_dir or client.root_dir
    ok(string.format('client %d, root %s, buffers %s', client.id, tostring(root),
      table.concat(vim.tbl_keys(client.attached_buffers or {}), ',')))
  end

  local worker = vim.tbl_get(config.settings or {}, 'worker', 'python') or python
  if worker then
    local out, fine = run({ worker, '-c', 'import torch; print(torch.__version__)' })
    if fine then
      ok('torch ' .. out .. ' in the worker Python (' .. worker .. ')')
    else
      warn('torch is not importable by the worker Python ' .. worker,
        { 'set settings.worker.python to a Python with torch, or install torch there' })
    end
  else
    info('worker Python: the server\'s interpreter (settings.worker.python is not set)')
  end

  if vim.ui.open then
    ok('URLs open with vim.ui.open')
  else
    local opener = vim.fn.has('mac') == 1 and 'open' or (vim.fn.has('win32') == 1 and 'rundll32' or 'xdg-open')
    if vim.fn.executable(opener) == 1 then
      ok('URLs open with ' .. opener)
    else
      warn(opener .. ' not found: :KernelscopeOpenTrace will show the Perfetto URL instead')
    end
  end
end

return M
