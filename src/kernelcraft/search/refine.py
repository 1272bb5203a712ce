"""Strategy `refine`: K independent samples per task, each refined over up to N turns. Every turn
the model sees the judge's feedback on its previous attempt, with the conversation cut to a token
budget. With `start = "best"` every sample begins from the best kernel the workspace already has
for the task. A resumed run rebuilds each sample's conversation from the store and goes on from its
next turn."""

from __future__ import annotations

from typing import Any

from ..llm import LLMError, Message
from .history import Exchange, trimmed_history
from .registry import register
from .repeats import answer_key, repeating
from .strategy import Outcome, TaskContext, run_parallel


def converse(ctx: TaskContext, sample: int, opening: list[Message], turns: int, meta: dict[str, Any] | None = None) -> list[Outcome]:
    """One sample's conversation: up to `turns` answers, each told the judge's verdict on the one
    before, ended early by the same answer `REPEAT_LIMIT` times in a row (repeats.py). Turns a stopped run
    recorded are replayed from the store, not asked again; a turn a judge error parked is judged again from
    its stored source."""
    done = sorted((a for a in ctx.prior if a.sample == sample), key=lambda a: a.turn)
    outcomes = [ctx.outcome_of(a) for a in done]
    replies = [ctx.reply_of(a) for a in done]
    exchanges = [Exchange(reply, a.feedback) for a, reply in zip(done, replies) if reply is not None]
    answers = [answer_key(o.source, reply) for o, reply in zip(outcomes, replies)]
    for turn in range(len(done), turns):
        if repeating(answers):  # the same answer again and again: more turns would only ask once more
            ctx.end_repeating(sample, turn)
            break
        held = ctx.held(sample, turn)
        if held is not None:
            outcome = ctx.record_source(sample, turn, held.source, meta, llm_call_id=held.llm_call_id)
            reply = held.reply
        else:
            messages = trimmed_history(opening, exchanges, ctx.config.history_tokens, ctx.coder.omitted_note)
            try:
                proposal = ctx.ask(messages, sample)
            except LLMError as e:  # this sample's call failed for good (after retries): it ends here
                outcomes.append(ctx.record_llm_error(sample, turn, e, meta))
                break
            outcome = ctx.record(sample, turn, proposal, meta)
            reply = proposal.reply.text
        outcomes.append(outcome)
        answers.append(answer_key(outcome.source, reply))
        if reply is not None:
            exchanges.append(Exchange(reply, outcome.feedback))
    return outcomes


@register("refine", reads=("turns", "samples", "start"))
class Refine:
    def run(self, ctx: TaskContext) -> None:
        start = ctx.start_kernel()
        run_parallel([lambda s=s: converse(ctx, s, opening(ctx, s, start), ctx.config.turns) for s in range(ctx.config.samples)],
                     "refine")


def opening(ctx: TaskContext, sample: int, start: Outcome | None) -> list[Message]:
    """A sample's first messages: the task, and the kernel to start from when the run starts from one."""
    if start is None:
        return ctx.opening(sample)
    return ctx.coder.directed(ctx.opening(sample), "mutation", parent=start.example())
