"""The MCP server README's MCP blocks take as yours: ``from server import server`` in process, and
``python server.py`` on stdio."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes", log_level="ERROR")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def search(query: str, limit: int = 3) -> list[str]:
    """Search the notes; returns matching titles."""
    return [f"{query} #{i}" for i in range(limit)]


if __name__ == "__main__":
    server.run()  # stdio
