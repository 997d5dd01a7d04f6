"""Review stage: PNG boards per page and an HTML gallery of the most informative pages.

Its modules are imported one by one (`options` with the config, the drawing ones when the stage
runs), so the package itself imports none of them.
"""

__all__: list[str] = []
