"""The figures: drawn from the tables at print size (style), one module per kind of figure,
and `draw`, which saves any of them by name. No module here imports a prose module."""
