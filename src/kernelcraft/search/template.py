"""Strategy `template`: no language model. The GEMM templates of `kernels.gemm` (Triton kernels, and
CUTLASS kernels on Hopper) are searched per shape with the judge as the scorer: a coarse stage
judges the first `configs` of the shape's space with a short recipe (few seeds, short timing), a
fine stage judges the `finalists` fastest again with the run's own recipe; the best fine verdict
is the task's result. The configurations that earlier runs found fastest on the same task and
device (as many as there are finalists; those of this judge and recipe first, then those of any
other) are judged first, then ones no run has judged; with no more configurations than finalists
there is no coarse stage. The fine stage measures in the run itself, never reusing an earlier
run's verdict: a configuration carried over because its earlier verdict was the fastest would
otherwise report the luckiest of several measurements (a new run that reused them reported the
carried-over shapes 1.5% faster with no kernel measured again, H100, 2026-11-25). Its kernels are ordinary
verdicts of the workspace, so `--start best` can hand them to a model-led strategy.

Attempts: sample = the configuration's index in the space, turn 0 coarse and 1 fine. The space is
saved before anything is judged, so a resumed run judges the same configurations and replays
what it had recorded."""

from __future__ import annotations

from ..judge import normalized_hash
from ..kernels.gemm import DeviceCaps, KernelConfig, config_from_dict, config_of_source, kernel_space, render_config
from ..tasks import Shape, Task, shape_of
from .errors import TaskFailed
from .registry import register
from .strategy import SCREENING, Outcome, TaskContext, run_parallel

COARSE, FINE = 0, 1  # the turns of the two stages


def gemm_shape(task: Task) -> Shape:
    """The task's GEMM shape; TaskFailed when the task is not one of the GEMM suite's."""
    shape = shape_of(task)
    if shape is None:
        raise TaskFailed(not_a_gemm(task))
    return shape


def not_a_gemm(task: Task) -> str | None:
    """Why the template strategy cannot work on `task` (it is not a GEMM of the hgemm suite), or None."""
    if shape_of(task) is not None:
        return None
    return f"{task.key} is not a GEMM task: the template strategy needs the shape of an hgemm task (hgemm/MxNxK)"


@register("template", needs_model=False, task_check=not_a_gemm, reads=("template",))
class TemplateSearch:
    def run(self, ctx: TaskContext) -> None:
        options = ctx.config.template
        coarse = ctx.rejudged(options.coarse)
        configs = self._configs(ctx, coarse)
        fine = ctx.measured_here()
        if len(configs) <= options.finalists:  # every configuration is a finalist: nothing to screen
            run_parallel([lambda i=i: self._judge(fine, i, FINE, configs[i]) for i in range(len(configs))], "template")
            return
        screened = run_parallel([lambda i=i: self._judge(coarse, i, COARSE, configs[i]) for i in range(len(configs))],
                                "template")
        correct = sorted((i for i, o in enumerate(screened) if o.correct), key=lambda i: -(screened[i].speedup or 0.0))
        run_parallel([lambda i=i: self._judge(fine, i, FINE, configs[i]) for i in correct[:options.finalists]], "template")

    @staticmethod
    def _configs(ctx: TaskContext, coarse: TaskContext) -> list[KernelConfig]:
        """The configurations this task's search judges (`coarse`: the task as its coarse stage judges
        it): saved the first time, read back on resume."""
        saved = ctx.saved("configs")
        if saved is None:
            options = ctx.config.template
            space = kernel_space(gemm_shape(ctx.task), DeviceCaps.of(ctx.device))
            # The fastest that earlier runs measured on this task and device come first (this judge and
            # recipe's, then another's: a new judge version keeps what the search learnt), then what
            # no run has judged yet: each run goes further down the space instead of judging again
            # what is known (a verdict reused costs nothing, but it takes a place).
            known = ctx.store.correct_kernels(ctx.context) + ctx.store.correct_kernels_anywhere(ctx.task.key, ctx.device.name)
            measured = [config_of_source(source) for _, source, _ in known]
            best = list(dict.fromkeys(c for c in measured if c in space))[:options.finalists]
            judged = ctx.store.judged_norm_hashes(ctx.context) | ctx.store.judged_norm_hashes(coarse.context)
            picked = best[:options.configs]
            for c in space:
                if len(picked) >= options.configs:
                    break
                if c not in picked and normalized_hash(render_config(c)) not in judged:
                    picked.append(c)
            saved = [c.to_dict() for c in picked]
            ctx.save("configs", saved)
        return [config_from_dict(d) for d in saved]

    @staticmethod
    def _judge(ctx: TaskContext, index: int, turn: int, config: KernelConfig) -> Outcome:
        prior = ctx.prior_attempt(index, turn)
        if prior is not None:
            return ctx.outcome_of(prior)
        meta = {"stage": "coarse" if turn == COARSE else "fine", "config": config.to_dict(), "name": config.name}
        if turn == COARSE:
            meta[SCREENING] = True
        return ctx.record_source(index, turn, render_config(config), meta)
