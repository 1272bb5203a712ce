"""The agents' roles: the coder, the idea planner, the skill selector and the skill summarizer.
Prompts are jinja2 templates; replies are parsed into candidates, ideas, picks or skill drafts.
Agents never time anything; the judge does."""

from .coder import DIRECTIONS, Coder, KernelExample, Proposal, SkillText
from .languages import LANGUAGES, Language, LanguageError, language_for
from .parse import ParseFailure, Truncated, contrastive_sections, extract_candidate, extract_json
from .planner import Plan, Planner, TriedIdea, parse_ideas
from .prompts import render
from .selector import Selection, SkillCard, SkillChoice, SkillSelector, parse_choices
from .summarizer import SkillDraft, SkillSummarizer, Summary, parse_drafts, skill_name

__all__ = [
    "DIRECTIONS", "LANGUAGES", "Coder", "KernelExample", "Language", "LanguageError", "ParseFailure", "Plan", "Planner", "Proposal", "Selection",
    "SkillCard", "SkillChoice", "SkillDraft", "SkillSelector", "SkillSummarizer", "SkillText", "Summary", "TriedIdea", "Truncated",
    "contrastive_sections", "extract_candidate", "extract_json", "language_for", "parse_choices", "parse_drafts", "parse_ideas", "render",
    "skill_name",
]
