"""What the model sees: the late-injected reminder, token estimates, and (later) the layers."""
