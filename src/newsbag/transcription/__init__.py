"""Transcription stage: the text of each page's fused text and title regions, in reading order.

Its modules are imported one by one (`options` with the config, the recognisers when the stage
runs), so the package itself imports none of them.
"""

__all__: list[str] = []
