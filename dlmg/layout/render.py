"""Pictures of a layout: the block-to-device table of ``str(layout)`` and
:meth:`Layout.plot`.

Both show a 2-D map: rows are the blocks of mode 0, columns the blocks of mode
1 (the NumPy convention; the cuTENSORMg documentation draws mode 0 across).
A 1-D layout is one row, a scalar one cell, and a layout of higher rank is cut
at index 0 of modes 2 and up. Each cell names the device(s) holding that block,
one per replica (``cuda:0 & cuda:4``); when a device holds several fragments
the fragment number is added (``#2 cpu:0``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import FrameworkNotInstalledError

if TYPE_CHECKING:  # pragma: no cover
    from .layout import Layout

__all__ = ["render_text", "render_table", "render_fragments", "plot_layout", "block_map"]

#: Tables show at most this many blocks per mode (first ones, "...", last one).
MAX_BLOCKS_SHOWN = 12
#: The fragment summary lists at most this many fragments.
MAX_FRAGMENTS_SHOWN = 32


def _shown(n: int, limit: int) -> list[int | None]:
    """Positions to draw out of ``n``, ``None`` standing for the elided ones."""
    if n <= limit:
        return list(range(n))
    return list(range(limit - 2)) + [None, n - 1]


def _cut(layout: "Layout") -> tuple[int, int, list[tuple[int, int]], list[tuple[int, int]]]:
    """Rows and columns of the 2-D map: ``(nrows, ncols, row ranges, col ranges)``.

    Rows are blocks of mode 0 and columns blocks of mode 1; for rank 1 the one
    row is the whole (absent) mode and the columns are the blocks of mode 0.
    """

    def ranges(m: int) -> list[tuple[int, int]]:
        n, b = layout.shape[m], layout.block[m]
        return [(j * b, min((j + 1) * b, n)) for j in range(layout.nblocks[m])]

    if layout.ndim == 0:
        return 1, 1, [(0, 1)], [(0, 1)]
    if layout.ndim == 1:
        cols = ranges(0)
        return 1, len(cols), [(0, 1)], cols
    rows, cols = ranges(0), ranges(1)
    return len(rows), len(cols), rows, cols


def block_map(layout: "Layout") -> list[list[tuple[int, ...]]]:
    """The 2-D cut as a list of rows of cells, each cell the fragments (one per
    replica) holding that block."""
    nrows, ncols, _, _ = _cut(layout)
    out = []
    for r in range(nrows):
        row = []
        for c in range(ncols):
            row.append(layout.owners(_block_origin(layout, r, c)))
        out.append(row)
    return out


def _block_origin(layout: "Layout", r: int, c: int) -> tuple[int, ...]:
    """The global index of the first element of the block in row ``r``, column ``c``."""
    if layout.ndim == 0:
        return ()
    if layout.ndim == 1:
        return (c * layout.block[0],)
    return (r * layout.block[0], c * layout.block[1]) + (0,) * (layout.ndim - 2)


def _place(layout: "Layout", f: int) -> str:
    """``cuda:0``, or ``1:cuda:0`` (rank 1's cuda:0) when the layout spans processes."""
    device = str(layout.devices[f])
    return f"{layout.ranks[f]}:{device}" if any(layout.ranks) else device


def _cell_label(layout: "Layout", fragments: tuple[int, ...]) -> str:
    places = list(zip(layout.ranks, layout.devices))
    unique = len(set(places)) == len(places)
    labels = []
    for f in fragments:
        place = _place(layout, f)
        labels.append(place if unique else f"#{f} {place}")
    return " & ".join(labels)


def render_table(layout: "Layout") -> str:
    """The block-to-device table of the 2-D cut (see the module docstring)."""
    nd = layout.ndim
    if nd == 0:
        title = "one block (rank 0):"
    elif nd == 1:
        title = "blocks of mode 0:"
    else:
        title = "blocks of mode 0 (rows) x mode 1 (columns)"
        if nd > 2:
            title += f", cut at index 0 of modes {', '.join(str(m) for m in range(2, nd))}"
        title += ":"
    if any(n == 0 for n in layout.shape):
        zero = [m for m, n in enumerate(layout.shape) if n == 0]
        return f"{title}\n  (no blocks: mode {zero[0]} has extent 0)"
    nrows, ncols, row_ranges, col_ranges = _cut(layout)
    rows_shown = _shown(nrows, MAX_BLOCKS_SHOWN)
    cols_shown = _shown(ncols, MAX_BLOCKS_SHOWN)

    def span(rng: tuple[int, int]) -> str:
        return f"{rng[0]}:{rng[1]}"

    header = [""] + ["..." if c is None else span(col_ranges[c]) for c in cols_shown]
    if nd == 0:
        header = ["", "()"]
    body = []
    for r in rows_shown:
        if r is None:
            body.append(["..."] + ["..." for _ in cols_shown])
            continue
        if nd == 0:
            label = "()"
        elif nd == 1:
            label = ""
        else:
            label = span(row_ranges[r])
        cells = [label]
        for c in cols_shown:
            if c is None:
                cells.append("...")
            else:
                cells.append(_cell_label(layout, layout.owners(_block_origin(layout, r, c))))
        body.append(cells)
    table = [header] + body
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = []
    for row in table:
        lines.append("  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths)).rstrip())
    return title + "\n" + "\n".join(lines)


def render_fragments(layout: "Layout") -> str:
    """One line per fragment: index, coords, replica, device, local shape, blocks."""
    header = ["fragment", "coords", "replica", "device", "local shape", "blocks"]
    rows = [header]
    n = layout.nfragments
    shown = _shown(n, MAX_FRAGMENTS_SHOWN)
    for f in shown:
        if f is None:
            rows.append(["..."] + [""] * (len(header) - 1))
            continue
        frag = layout.fragment(f)
        blocks = "(" + ", ".join(_compact(b) for b in frag.blocks) + ("," if frag.ndim == 1 else "") + ")"
        rows.append(
            [str(f), str(frag.coords), str(frag.replica), _place(layout, f), str(frag.shape), blocks]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def _compact(blocks: tuple[int, ...]) -> str:
    """``[0, 2, 4]``; long arithmetic runs as ``[0, 2, ..., 98]``."""
    if len(blocks) <= 6:
        return "[" + ", ".join(str(b) for b in blocks) + "]"
    return f"[{blocks[0]}, {blocks[1]}, ..., {blocks[-1]}] ({len(blocks)} blocks)"


def render_text(layout: "Layout") -> str:
    """``str(layout)``: a header line, the block table and the fragment summary."""
    head = (
        f"Layout shape={layout.shape} block={layout.block} grid={layout.grid} "
        f"replicas={layout.nreplicas}{'' if layout.partial is None else f' (pending {layout.partial} of them)'} "
        f"({layout.nfragments} fragment{'' if layout.nfragments == 1 else 's'} on "
        f"{'the host' if layout.on_host else 'devices'}, "
        f"{'dense' if layout.is_dense else f'element_strides={layout.element_strides} block_strides={layout.block_strides}'})"
    )
    return f"{head}\n{render_table(layout)}\n{render_fragments(layout)}"


def plot_layout(layout: "Layout", ax: Any = None) -> Any:
    """Draw the 2-D cut of ``layout``, one rectangle per block, coloured by
    device and sized by the block's extent; returns the figure."""
    try:
        import matplotlib
        from matplotlib.patches import Rectangle
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise FrameworkNotInstalledError(
            "Layout.plot() needs matplotlib: pip install 'dlmg[plot]' (or pip install matplotlib)"
        ) from exc
    if ax is None:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    places = sorted(set(zip(layout.ranks, layout.devices)), key=lambda p: (p[0], p[1].kind, p[1].index))
    cmap = matplotlib.colormaps["tab20" if len(places) > 10 else "tab10"]
    colour = {p: cmap(i % cmap.N) for i, p in enumerate(places)}
    nrows, ncols, row_ranges, col_ranges = _cut(layout)
    if layout.ndim == 1:
        row_ranges = [(0, 1)]
    empty = any(n == 0 for n in layout.shape)
    if not empty:
        for r in range(nrows):
            y0, y1 = row_ranges[r]
            for c in range(ncols):
                x0, x1 = col_ranges[c]
                owners = layout.owners(_block_origin(layout, r, c))
                place = (layout.ranks[owners[0]], layout.devices[owners[0]])
                ax.add_patch(
                    Rectangle((x0, y0), x1 - x0, y1 - y0, facecolor=colour[place], edgecolor="black", lw=1)
                )
                if nrows * ncols <= 400:
                    ax.text(
                        (x0 + x1) / 2, (y0 + y1) / 2, _cell_label(layout, owners).replace(" & ", "\n"),
                        ha="center", va="center", fontsize=8,
                    )
    height = row_ranges[-1][1] if row_ranges and not empty else 1
    width = col_ranges[-1][1] if col_ranges and not empty else 1
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # row 0 on top, like a matrix
    ax.set_aspect("equal" if max(width, height) <= 20 * min(width, height) else "auto")
    ax.set_xlabel("mode 1" if layout.ndim >= 2 else ("mode 0" if layout.ndim == 1 else ""))
    ax.set_ylabel("mode 0" if layout.ndim >= 2 else "")
    ax.set_title(f"shape={layout.shape} block={layout.block} grid={layout.grid}", fontsize=9)
    return fig
