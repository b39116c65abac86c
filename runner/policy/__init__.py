"""Policy files: models, loader and the decisions they make about tools."""
