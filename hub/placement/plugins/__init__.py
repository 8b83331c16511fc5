"""The built-in placement plugins, one per module; ``hub.placement.registry`` names them."""
