"""What an agent runtime plugs in: the built-in tools (one registry, served over MCP and run
by the turn loop), the MCP server, and the turn loop itself (issue 20)."""
