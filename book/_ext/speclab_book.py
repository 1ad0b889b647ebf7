"""speclab's own Sphinx extension for the book (loaded from _config.yml, `local_extensions`)."""
from __future__ import annotations

from sphinx.application import Sphinx


def _share_html_handlers(app: Sphinx) -> None:
    """Let the single-page builder render every node the HTML builder can.

    Sphinx takes a builder's node handlers from its name ("singlehtml") when any extension
    registered one under that name, and then ignores those registered for its format ("html"),
    such as MyST-NB's collapsed-cell node. Merging the two keeps both.
    """
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    merged = dict(handlers.get("html", {}))
    merged.update(handlers.get("singlehtml", {}))
    handlers["singlehtml"] = merged


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _share_html_handlers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
