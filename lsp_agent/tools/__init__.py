"""The agent's tools: path confinement, reading, searching, editing, commands."""
