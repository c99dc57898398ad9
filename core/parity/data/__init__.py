"""Input data: tensor metadata, shape parsing and data loaders."""
