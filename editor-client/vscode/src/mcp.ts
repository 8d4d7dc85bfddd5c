// `kernelscope mcp` for the editor's agents: registered with VS Code's MCP server-definition
// API (VS Code 1.100 and newer), so agent mode finds kernelscope's tools without setup. The
// server runs with the same Python as the language server, in the first workspace folder.
// Older VS Code has no such API: the extension says so once in its log and goes on.

import * as vscode from 'vscode';
import { resolveInterpreter } from './interpreter';

/**
 * The provider's id; package.json names it in contributes.mcpServerDefinitionProviders (VS Code
 * 1.101+) and contributes.modelContextServerCollections (its name in 1.100).
 */
export const MCP_PROVIDER_ID = 'kernelscope.mcp';

/** The parts of VS Code's MCP API used here (the extension builds against 1.91's types). */
interface StdioDefinition {
  cwd?: vscode.Uri;
}
type StdioDefinitionClass = new (
  label: string,
  command: string,
  args?: string[],
  env?: Record<string, string | number | null>,
  version?: string,
) => StdioDefinition;
interface DefinitionProvider {
  onDidChangeMcpServerDefinitions: vscode.Event<void>;
  provideMcpServerDefinitions(token: vscode.CancellationToken): Promise<StdioDefinition[]>;
  resolveMcpServerDefinition(server: StdioDefinition, token: vscode.CancellationToken): StdioDefinition | undefined;
}
interface McpApi {
  lm?: { registerMcpServerDefinitionProvider?(id: string, provider: DefinitionProvider): vscode.Disposable };
  McpStdioServerDefinition?: StdioDefinitionClass;
}

/** The command line of the MCP server for an interpreter. */
export function mcpArgs(): string[] {
  return ['-m', 'kernelscope', 'mcp'];
}

/**
 * Registers the definition provider; false (and a log line) where VS Code has no MCP API.
 * `changed` fires when the interpreter or the workspace's trust changes.
 */
export function registerMcpServer(
  context: vscode.ExtensionContext,
  version: string,
  log: (line: string) => void,
  changed: vscode.Event<void>,
): boolean {
  const api = vscode as unknown as McpApi;
  const register = api.lm?.registerMcpServerDefinitionProvider;
  const Definition = api.McpStdioServerDefinition;
  if (!register || !Definition) {
    log(`MCP: VS Code ${vscode.version} has no MCP server-definition API (1.100+); run \`kernelscope mcp\` from an MCP client instead`);
    return false;
  }
  const provider: DefinitionProvider = {
    onDidChangeMcpServerDefinitions: changed,
    async provideMcpServerDefinitions() {
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
      const interpreter = await resolveInterpreter(folder, log);
      const server = new Definition('kernelscope', interpreter.command, mcpArgs(), { PYTHONUNBUFFERED: '1' }, version);
      server.cwd = folder;
      return [server];
    },
    resolveMcpServerDefinition(server) {
      // Its tools run the workspace's code, as profiling does: not in Restricted Mode.
      if (!vscode.workspace.isTrusted) {
        void vscode.window.showWarningMessage('kernelscope: the MCP server runs code from this workspace; trust it first.');
        return undefined;
      }
      return server;
    },
  };
  try {
    context.subscriptions.push(register.call(api.lm, MCP_PROVIDER_ID, provider));
  } catch (e) {
    log(`MCP: VS Code ${vscode.version} refused the server definition: ${String(e)}`);
    return false;
  }
  log(`MCP: kernelscope's tools are registered for agents (${MCP_PROVIDER_ID}, VS Code ${vscode.version})`);
  return true;
}
