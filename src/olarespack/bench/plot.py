"""The runs of a bench as a picture (PNG): each measured run's tokens per second in order, with the average and
the warm-ups, so a cycle (five fast runs, four slow ones) shows at a glance. matplotlib with its Agg backend,
imported only here: other commands do not pay for it, and no display is needed."""

from __future__ import annotations

import io

from olarespack.bench.run import DEFINITIONS, Result


def plot_png(result: Result, title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import MaxNLocator

    figure, axes = pyplot.subplots(figsize=(8, 4.5), dpi=100)
    try:
        runs = [run.index for run in result.runs]
        axes.plot(runs, result.rates, marker="o", label="measured runs")
        if result.warmups:
            axes.plot(
                [-len(result.warmups) + i for i in range(1, len(result.warmups) + 1)],
                [run.tps for run in result.warmups],
                marker="x",
                linestyle="none",
                color="grey",
                label="warm-ups (not counted)",
            )
        slow = result.slow
        if slow is not None:
            axes.axvspan(
                slow.first - 0.5,
                slow.last + 0.5,
                color="tab:red",
                alpha=0.12,
                label=f"slow phase: {slow.describe()}"[:90],
            )
        average = result.summary()["tps_avg"]
        axes.axhline(average, linestyle="--", color="black", linewidth=1, label=f"average {average:.2f} t/s")
        axes.set_xlabel("run (warm-ups before 1)" if result.warmups else "run")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel("tokens/s")
        axes.set_ylim(bottom=0)
        axes.set_title(title, fontsize=10)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8, loc="lower right")
        figure.subplots_adjust(bottom=0.2)
        figure.text(0.01, 0.02, f"t/s: {DEFINITIONS[result.source]}", fontsize=7, color="dimgrey")
        out = io.BytesIO()
        figure.savefig(out, format="png")
        return out.getvalue()
    finally:
        pyplot.close(figure)


def plot_sweep_png(
    field: str,
    values: list[str],
    averages: list[float | None],
    lows: list[float | None],
    peaks: list[float | None],
    best: int | None,
    title: str,
) -> bytes:
    """One bar a value (its average, the runs' range as an error bar), the chosen one marked: the seed post's
    bar chart of a num_speculative_tokens sweep."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 4.5), dpi=100)
    try:
        heights = [a or 0.0 for a in averages]
        below = [
            max(a - lo, 0.0) if a is not None and lo is not None else 0.0 for a, lo in zip(averages, lows, strict=True)
        ]
        above = [
            max(p - a, 0.0) if a is not None and p is not None else 0.0 for a, p in zip(averages, peaks, strict=True)
        ]
        colours = ["tab:green" if i == best else "tab:blue" for i in range(len(values))]
        bars = axes.bar(values, heights, yerr=[below, above], capsize=4, color=colours)
        for bar, average in zip(bars, averages, strict=True):
            label = f"{average:.1f}" if average is not None else "refused"
            axes.annotate(
                label,
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
                xytext=(0, 2),
                textcoords="offset points",
            )
        axes.set_xlabel(field)
        axes.set_ylabel("tokens/s (average; bars: slowest to fastest run)")
        axes.set_ylim(bottom=0)
        axes.set_title(title, fontsize=10)
        axes.grid(True, axis="y", alpha=0.3)
        out = io.BytesIO()
        figure.savefig(out, format="png")
        return out.getvalue()
    finally:
        pyplot.close(figure)
