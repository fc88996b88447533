"""A bisection on the terminal: the live progress line, then the result."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from nebisect.minimize.options import thousands

if TYPE_CHECKING:
    from nebisect.minimize.bisector import BisectResult
    from nebisect.minimize.options import ProgressLine


class BisectDisplay:
    """The live line "1 000 ops → 3 ops, 21 evaluations" over a bar on stderr (the bar
    fills towards --max-evals when given, and pulses otherwise). The bar appears with
    the first line: a command that fails its checks first prints its one error line
    alone."""

    def __init__(self, console: Console) -> None:
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                            TimeElapsedColumn(), console=console, transient=False)
        self.task = self.bar.add_task("starting", total=None)
        self.started = False

    def __call__(self, line: ProgressLine) -> None:
        if not self.started:
            self.bar.start()
            self.started = True
        self.bar.update(self.task, description=line.text(), completed=line.evaluations,
                        total=line.max_evals)

    def __enter__(self) -> BisectDisplay:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """The last state stays on screen after a result; an error's one line replaces
        it (the line says what failed)."""
        if not self.started:
            return
        if kind is not None:
            self.bar.live.transient = True
        self.bar.stop()


def print_result(result: BisectResult, out: Path) -> None:
    """What was reduced to what, the trigger, the signature (and where it enters), the
    units kept and the files written to ``out``."""
    console = Console()
    state = "complete (1-minimal)" if result.complete else f"stopped: {result.stopped}"
    console.print(
        f"[bold]{thousands(result.units_before)} {result.unit} → "
        f"{thousands(result.units_after)} "
        f"{result.unit}[/], {result.evaluations} evaluations, {result.seconds:.1f} s — {state}",
        highlight=False,
    )
    if result.trigger:
        console.print(f"trigger: {escape(result.trigger)}", highlight=False, soft_wrap=True)
    console.print(f"signature: [red]{result.signature}[/]", highlight=False)
    if result.reduced_signature != result.signature:
        console.print(f"where it enters: [red]{result.reduced_signature}[/]", highlight=False)
    kept = ", ".join(f"{u} ({t})" for u, t in zip(result.kept, result.kept_types, strict=True))
    console.print(f"kept: {kept}", highlight=False)
    console.print(f"wrote {out}/: {', '.join(result.files)}  — run: python {out}/repro.py",
                  highlight=False)
