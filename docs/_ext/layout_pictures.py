"""A ``layout-plot`` directive: the picture ``Layout.plot()`` draws, made at build time.

Its content is Python that binds ``layout``; the directive runs it, saves the
figure under ``docs/_generated/`` (ignored by git) and puts the image in the
page, so the pictures always show what the code draws today::

    ```{layout-plot}
    :alt: row slabs over 4 devices
    layout = dlmg.Layout.slab((8, 6), axis=0, devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    ```
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective


class LayoutPlot(SphinxDirective):
    has_content = True
    option_spec = {"alt": directives.unchanged, "width": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        import dlmg

        code = "\n".join(self.content)
        namespace: dict[str, Any] = {"dlmg": dlmg, "Layout": dlmg.Layout}
        exec(compile(code, f"<{self.env.docname} layout-plot>", "exec"), namespace)
        layout = namespace.get("layout")
        if not isinstance(layout, dlmg.Layout):
            raise self.error("a layout-plot block must bind `layout` to a dlmg.Layout")
        name = hashlib.sha1(code.encode()).hexdigest()[:12] + ".png"
        out = Path(self.env.srcdir) / "_generated"
        out.mkdir(exist_ok=True)
        figure = layout.plot()
        figure.savefig(out / name, dpi=110, bbox_inches="tight")
        plt.close(figure)
        image = nodes.image(uri=f"/_generated/{name}", alt=self.options.get("alt", str(layout.shape)))
        if "width" in self.options:
            image["width"] = self.options["width"]
        return [image]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("layout-plot", LayoutPlot)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
