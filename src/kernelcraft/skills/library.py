"""The versioned skill library of a workspace. Every change makes a new snapshot; a run records the
snapshot it used, so what a model was shown can always be read back. A new workspace starts from
the seed library."""

from __future__ import annotations

from dataclasses import dataclass

from ..store import SnapshotRow, Store
from .files import seed_skills
from .model import Evidence, Skill


class SkillError(ValueError):
    """A request the library cannot honour (an unknown skill or snapshot); one line for the user."""


@dataclass(frozen=True)
class SnapshotDiff:
    added: list[str]
    removed: list[str]
    changed: list[str]  # a new version of the technique, or new evidence


class SkillLibrary:
    def __init__(self, store: Store) -> None:
        self.store = store
        if not store.snapshots():
            self._commit({}, [*seed_skills()], "the seed library")

    @property
    def current(self) -> int:
        """The newest snapshot's id."""
        return self.store.snapshots()[-1].id

    def snapshots(self) -> list[SnapshotRow]:
        return self.store.snapshots()

    def skills(self, snapshot: int | None = None) -> list[Skill]:
        sid = self.current if snapshot is None else snapshot
        if sid not in {s.id for s in self.store.snapshots()}:
            raise SkillError(f"no skill snapshot {sid} (snapshots: 1-{self.current})")
        return [Skill.model_validate(d) for d in self.store.snapshot_skills(sid)]

    def get(self, name: str, snapshot: int | None = None) -> Skill:
        for skill in self.skills(snapshot):
            if skill.name == name:
                return skill
        raise SkillError(f"no skill {name!r} in snapshot {snapshot or self.current}")

    def put(self, skills: list[Skill], reason: str) -> int:
        """Add skills (a skill of a name already held becomes its next version); returns the new snapshot."""
        members = {s.name: s.version for s in self.skills()}
        return self._commit(members, skills, reason)

    def remove(self, name: str) -> int:
        members = {s.name: s.version for s in self.skills()}
        if name not in members:
            raise SkillError(f"no skill {name!r} in snapshot {self.current}")
        del members[name]
        return self._commit(members, [], f"removed {name}")

    def add_evidence(self, name: str, evidence: Evidence) -> int:
        skill = self.get(name)
        return self.put([skill.model_copy(update={"evidence": [*skill.evidence, evidence]})], f"evidence for {name}")

    def diff(self, a: int, b: int) -> SnapshotDiff:
        old = {s.name: s for s in self.skills(a)}
        new = {s.name: s for s in self.skills(b)}
        return SnapshotDiff(added=sorted(new.keys() - old.keys()), removed=sorted(old.keys() - new.keys()),
                            changed=sorted(n for n in old.keys() & new.keys() if old[n].version != new[n].version))

    def _commit(self, members: dict[str, int], skills: list[Skill], reason: str) -> int:
        members = dict(members)
        for skill in skills:
            version = self.store.latest_skill_version(skill.name) + 1
            self.store.put_skill_version(skill.name, version, skill.model_copy(update={"version": version}).model_dump(mode="json"))
            members[skill.name] = version
        parent = self.store.snapshots()[-1].id if self.store.snapshots() else None
        return self.store.create_snapshot(parent, reason, members)
