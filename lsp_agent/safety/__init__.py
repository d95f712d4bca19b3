"""The walls: permissions decided in code, the kernel sandbox, and marking untrusted text."""
