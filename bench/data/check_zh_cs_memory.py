#!/usr/bin/env python3
"""Validate bench/data/zh_cs_memory.json (plain Python 3, no dependencies).

Usage: python3 bench/data/check_zh_cs_memory.py [path/to/zh_cs_memory.json]

Checks the schema, that every conversation (`sessions` in the JSON) alternates user/assistant starting with the user
and ending with the assistant, that ids are unique, that every referenced turn exists (and belongs to the question's
dialogue), that each answer (spaces removed) occurs in one of its answer turns (spaces removed) unless the question
is multi_hop, that no turn is both an answer and a stale turn of the same question, and the minimum counts. Prints
counts per kind. Exit status 0 when everything passes, 1 otherwise.
"""

import collections
import json
import os
import re
import sys

KINDS = {"single", "update", "correction", "vague", "multi_hop", "progress", "expiry", "preference", "third_party"}
MIN_DIALOGUES = 8
MIN_QUESTIONS = 100
MIN_QUESTIONS_PER_DIALOGUE = 10
SESSIONS_RANGE = (2, 4)
TURNS_RANGE = (8, 20)
MIN_KIND = {("update", "correction"): 12, ("vague",): 10, ("multi_hop",): 8}

# Things that must never appear: a run of 16-19 digits (a full bank-card number) or a password field.
SECRET_PATTERNS = [re.compile(r"(?<!\d)\d{16,19}(?!\d)"), re.compile(r"密码[是为:：]\s*\S")]


def norm(s):
    return re.sub(r"\s+", "", s)


def main(path):
    errors = []

    def err(msg):
        errors.append(msg)

    with open(path, encoding="utf-8") as f:
        data = json.load(f)

    for key in ("name", "version", "about", "dialogues"):
        if key not in data:
            err(f"top level: missing {key!r}")
    if data.get("name") != "zh_cs_memory":
        err(f"name is {data.get('name')!r}, expected 'zh_cs_memory'")
    if not isinstance(data.get("version"), int):
        err("version must be an integer")
    dialogues = data.get("dialogues") or []

    seen_ids = set()
    n_sessions = n_turns = 0
    kinds = collections.Counter()
    n_questions = 0

    def claim(id_, where):
        if not isinstance(id_, str) or not id_:
            err(f"{where}: missing or empty id")
        elif id_ in seen_ids:
            err(f"{where}: duplicate id {id_!r}")
        else:
            seen_ids.add(id_)

    for d in dialogues:
        did = d.get("id", "?")
        for key in ("id", "domain", "sessions", "questions"):
            if key not in d:
                err(f"dialogue {did}: missing {key!r}")
        claim(d.get("id"), f"dialogue {did}")
        turns_by_id = {}
        sessions = d.get("sessions") or []
        if not SESSIONS_RANGE[0] <= len(sessions) <= SESSIONS_RANGE[1]:
            err(f"dialogue {did}: {len(sessions)} sessions, expected {SESSIONS_RANGE[0]}-{SESSIONS_RANGE[1]}")
        prev_day = None
        for si, s in enumerate(sessions):
            sid = s.get("id", "?")
            for key in ("id", "day", "turns"):
                if key not in s:
                    err(f"conversation {sid}: missing {key!r}")
            claim(s.get("id"), f"conversation {sid}")
            day = s.get("day")
            if not isinstance(day, int) or day < 0:
                err(f"conversation {sid}: day must be a non-negative integer")
            else:
                if si == 0 and day != 0:
                    err(f"conversation {sid}: first conversation must have day 0")
                if prev_day is not None and day <= prev_day:
                    err(f"conversation {sid}: day {day} not after the previous conversation's day {prev_day}")
                prev_day = day
            turns = s.get("turns") or []
            n_sessions += 1
            n_turns += len(turns)
            if not TURNS_RANGE[0] <= len(turns) <= TURNS_RANGE[1]:
                err(f"conversation {sid}: {len(turns)} turns, expected {TURNS_RANGE[0]}-{TURNS_RANGE[1]}")
            for ti, t in enumerate(turns):
                tid = t.get("id", "?")
                for key in ("id", "role", "text"):
                    if key not in t:
                        err(f"turn {tid}: missing {key!r}")
                claim(t.get("id"), f"turn {tid}")
                want = "user" if ti % 2 == 0 else "assistant"
                if t.get("role") != want:
                    err(f"turn {tid}: role {t.get('role')!r}, expected {want!r} (roles must alternate, user first)")
                text = t.get("text")
                if not isinstance(text, str) or not text.strip():
                    err(f"turn {tid}: empty text")
                    text = ""
                for pat in SECRET_PATTERNS:
                    if pat.search(norm(text) if pat is SECRET_PATTERNS[0] else text):
                        err(f"turn {tid}: looks like a secret ({pat.pattern})")
                turns_by_id[t.get("id")] = text
            if turns and turns[-1].get("role") != "assistant":
                err(f"conversation {sid}: must end with an assistant turn")

        questions = d.get("questions") or []
        if len(questions) < MIN_QUESTIONS_PER_DIALOGUE:
            err(f"dialogue {did}: {len(questions)} questions, expected at least {MIN_QUESTIONS_PER_DIALOGUE}")
        for q in questions:
            qid = q.get("id", "?")
            for key in ("id", "question", "kind", "answer", "answer_turns", "stale_turns"):
                if key not in q:
                    err(f"question {qid}: missing {key!r}")
            claim(q.get("id"), f"question {qid}")
            n_questions += 1
            kind = q.get("kind")
            kinds[kind] += 1
            if kind not in KINDS:
                err(f"question {qid}: unknown kind {kind!r}")
            if not str(q.get("question", "")).strip():
                err(f"question {qid}: empty question")
            answer = q.get("answer")
            if not isinstance(answer, str) or not answer.strip():
                err(f"question {qid}: empty answer")
                answer = ""
            ans_turns = q.get("answer_turns") or []
            stale = q.get("stale_turns")
            if not isinstance(stale, list):
                err(f"question {qid}: stale_turns must be a list")
                stale = []
            if not ans_turns:
                err(f"question {qid}: no answer_turns")
            for ref in list(ans_turns) + list(stale):
                if ref not in turns_by_id:
                    where = "another dialogue" if ref in seen_ids else "nowhere"
                    err(f"question {qid}: turn {ref!r} not in dialogue {did} (found {where})")
            both = set(ans_turns) & set(stale)
            if both:
                err(f"question {qid}: turns both answer and stale: {sorted(both)}")
            if len(set(ans_turns)) != len(ans_turns) or len(set(stale)) != len(stale):
                err(f"question {qid}: repeated turn id in answer_turns or stale_turns")
            if kind == "multi_hop" and len(ans_turns) < 2:
                err(f"question {qid}: multi_hop needs at least two answer turns")
            if kind != "multi_hop" and answer:
                a = norm(answer)
                if not any(a in norm(turns_by_id.get(ref, "")) for ref in ans_turns):
                    err(f"question {qid}: answer {answer!r} not found in any answer turn {ans_turns}")

    if len(dialogues) < MIN_DIALOGUES:
        err(f"{len(dialogues)} dialogues, expected at least {MIN_DIALOGUES}")
    if n_questions < MIN_QUESTIONS:
        err(f"{n_questions} questions, expected at least {MIN_QUESTIONS}")
    for group, minimum in MIN_KIND.items():
        got = sum(kinds[k] for k in group)
        if got < minimum:
            err(f"{'/'.join(group)}: {got} questions, expected at least {minimum}")

    print(f"{path}")
    print(f"dialogues {len(dialogues)}, sessions {n_sessions}, turns {n_turns}, questions {n_questions}")
    for kind in sorted(KINDS, key=lambda k: (-kinds[k], k)):
        print(f"  {kind:<12} {kinds[kind]}")
    with_stale = sum(1 for d in dialogues for q in d.get("questions") or [] if q.get("stale_turns"))
    print(f"  questions with stale turns: {with_stale}")
    if errors:
        print(f"FAIL: {len(errors)} problem(s)")
        for e in errors:
            print("  - " + e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zh_cs_memory.json")
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else default))
