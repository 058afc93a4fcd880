"""What the commands share: loading a model from flags, the service's state folder, the demo world, VLM options."""
