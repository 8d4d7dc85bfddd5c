"""The engine for coding agents: an MCP server over stdio (``kernelscope mcp``)."""
