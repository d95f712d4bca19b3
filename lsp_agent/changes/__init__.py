"""What changed in the workspace since the agent's last turn, and who changed it."""
