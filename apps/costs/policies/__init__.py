"""The policy kinds: `base` holds what a kind is and the registry; each other module registers one kind."""
