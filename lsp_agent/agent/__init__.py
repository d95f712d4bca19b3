"""The agent: a workspace's sessions, the turn loop, the system prompt, standing instructions."""
