"""Strategy `refine`: K independent samples per task, each refined over up to N turns. Every turn
the model sees the judge's feedback on its previous attempt, with the conversation cut to a token
budget. A resumed run rebuilds each sample's conversation from the store and goes on from its
next turn."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..llm import LLMError
from .history import Exchange, trimmed_history
from .strategy import RunStopped, TaskContext, register


@register("refine")
class Refine:
    def run(self, ctx: TaskContext) -> None:
        samples = range(ctx.config.samples)
        with ThreadPoolExecutor(max_workers=len(samples), thread_name_prefix="kc-refine") as pool:
            futures = [pool.submit(self._sample, ctx, s) for s in samples]
            errors = [f.exception() for f in futures]
        # RunStopped first: a stopping run outranks one task's failure
        for e in sorted((e for e in errors if e is not None), key=lambda e: not isinstance(e, RunStopped)):
            raise e

    def _sample(self, ctx: TaskContext, sample: int) -> None:
        done = sorted((a for a in ctx.prior if a.sample == sample), key=lambda a: a.turn)
        exchanges = []
        for a in done:
            reply = ctx.store.llm_reply(a.llm_call_id) if a.llm_call_id is not None else None
            if reply is not None:
                exchanges.append(Exchange(reply, a.feedback))
        opening = ctx.coder.opening(ctx.task, ctx.atol, ctx.rtol)
        for turn in range(len(done), ctx.config.turns):
            messages = trimmed_history(opening, exchanges, ctx.config.history_tokens, ctx.coder.omitted_note)
            try:
                proposal = ctx.ask(messages, sample)
            except LLMError as e:  # this sample's call failed for good (after retries): it ends here
                ctx.record_llm_error(sample, turn, e)
                return
            feedback = ctx.record(sample, turn, proposal)
            exchanges.append(Exchange(proposal.reply.text, feedback))
