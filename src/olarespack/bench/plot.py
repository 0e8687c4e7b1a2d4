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
            axes.plot([-len(result.warmups) + i for i in range(1, len(result.warmups) + 1)],
                      [run.tps for run in result.warmups], marker="x", linestyle="none", color="grey",
                      label="warm-ups (not counted)")
        slow = result.slow
        if slow is not None:
            axes.axvspan(slow.first - 0.5, slow.last + 0.5, color="tab:red", alpha=0.12,
                         label=f"slow phase: {slow.describe()}"[:90])
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
