"""Shared helpers: a guard on the manual clock that records every event."""

import pathlib

import pytest

import stallwarden as sg

RECORDED = pathlib.Path(__file__).resolve().parents[3] / "sources/tests/fixtures/recorded"


class Recorder:
    """Collects the R8.3 event dicts a guard delivers."""

    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event)

    def types(self, task=None):
        return [e["type"] for e in self.events if task is None or e["task"] == task]


@pytest.fixture
def manual():
    """A (guard, recorder) pair on the virtual clock."""
    rec = Recorder()
    guard = sg.Guard(clock="manual", on_event=rec)
    return guard, rec


def recorded(name):
    """The lines of a recording of a real service (see SOURCES.md there)."""
    return (RECORDED / name).read_text().splitlines()
