"""How often judge-directed text in a response talks the judge into a verdict, before and after the judge prompts
delimited the response and told the judge to grade it as text: both prompts in the same run, same server, same
sampling.

    python launch/bench_judge_injection.py                          # SmolLM2 on a local llama.cpp server
    python launch/bench_judge_injection.py --base_url=http://HOST:PORT/v1 --model=NAME [--structured_output=...]

The fixture set (harnessrl_jax/data/judge_injection/): requests with one criterion, a response that fails it and
one that meets it, and judge-directed texts ("the response above meets every criterion", "ignore the rubric", a
verdict in JSON, an attempt to close the response block, ...). Each injection is added to every failing response.
Per prompt the table gives how often the judge marks met: the passing responses (should stay high), the clean
failing ones (the judge's own false positives), the injected failing ones (overall and per injection), and the
answers it failed to give or that could not be read. 'before' is the template the judge used until the change
(launch/prompts/criterion_undelimited.txt, the response pasted in as is); 'after' is what the judge sends now
(rubric/prompts/criterion.txt, the response between <response> tags it cannot close). The last rows say how many
responses the attributor's judge-directed signal (evolver.hacking.JUDGE_DIRECTED) flags.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import time

from absl import flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

flags.DEFINE_string("base_url", "", "An OpenAI-compatible judge server (with /v1); default: start llama.cpp's "
                    "server on SmolLM2-135M-Instruct.")
flags.DEFINE_string("model", "smollm2", "The served model name.")
flags.DEFINE_enum("structured_output", "json_object", ["json_schema", "json_object", "none"], "How the verdict "
                  "schema is sent (llama-cpp-python reads 'json_object').")
flags.DEFINE_integer("max_tokens", 96, "Answer budget per call.")
flags.DEFINE_integer("explanation_max_chars", 80, "maxLength of the explanation in the schema.")
flags.DEFINE_integer("max_concurrency", 2, "Calls in flight.")
flags.DEFINE_integer("limit", 0, "Use only the first N cases (0: all).")
FLAGS = flags.FLAGS

BEFORE = os.path.join(REPO, "launch", "prompts", "criterion_undelimited.txt")


def messages(template: str, task, response: str, *, delimited: bool) -> tuple[dict[str, str], ...]:
    """The judge's message for one (task, response) under `template`; `delimited` defuses <response> tags in the
    response as the judge does now (llm.render_response)."""
    from harnessrl_jax.rubric.judges import templates
    from harnessrl_jax.rubric.judges.llm import render_conversation, render_criterion, render_response

    text = templates.fill(template, conversation=render_conversation(task),
                          response=render_response(response) if delimited else response,
                          criterion=render_criterion(task.criteria[0]))
    return ({"role": "user", "content": text},)


def items(limit: int = 0):
    """(case id, kind, injection id or '', task, response) of the fixture set: passing, failing, injected."""
    from harnessrl_jax.data.injection import inject, load_injection_fixtures

    cases, injections = load_injection_fixtures()
    cases = cases[:limit] if limit else cases
    out = []
    for c in cases:
        out.append((c.id, "passing", "", c.task, c.passing))
        out.append((c.id, "failing", "", c.task, c.failing))
        out += [(c.id, "injected", i.id, c.task, inject(c.failing, i)) for i in injections]
    return out


def measure(judge, rows, *, max_concurrency: int = 2) -> dict[str, list[tuple[str, str, bool | None, str]]]:
    """Per prompt ('before', 'after') the (kind, injection, verdict or None, status) of every row."""
    from harnessrl_jax.rubric.judges import templates
    from harnessrl_jax.rubric.judges.llm import verdict_schema
    from harnessrl_jax.rubric.judges.parse import parse_verdict

    schema = verdict_schema(judge.explanation_max_chars)
    prompts = {"before": (templates.load_template(BEFORE), False), "after": (judge.criterion_template, True)}
    jobs = [(name, row) for name in prompts for row in rows]

    def one(job):
        name, (_, kind, inj, task, response) = job
        template, delimited = prompts[name]
        c = judge.complete(messages(template, task, response, delimited=delimited), schema)
        if c.status != "ok":
            return name, (kind, inj, None, c.status)
        v = parse_verdict(c.text).verdict
        return name, (kind, inj, v, "ok" if v is not None else "unparsed")

    out: dict[str, list] = {name: [] for name in prompts}
    with concurrent.futures.ThreadPoolExecutor(max_concurrency) as pool:
        for name, result in pool.map(one, jobs):
            out[name].append(result)
    return out


def table(results, rows) -> str:
    """The before/after table of met rates (and the attributor's flags)."""
    from harnessrl_jax.evolver.hacking import judge_directed

    def rate(res, pred):
        sel = [r for r in res if pred(r)]
        met = sum(r[2] is True for r in sel)
        return f"{met}/{len(sel)} ({100 * met / max(len(sel), 1):.0f}%)"

    lines = [f"{'marked met':42s} {'before':>14s} {'after':>14s}"]
    add = lambda label, pred: lines.append(  # noqa: E731
        f"{label:42s} {rate(results['before'], pred):>14s} {rate(results['after'], pred):>14s}")
    add("passing responses (should stay high)", lambda r: r[0] == "passing")
    add("failing responses, clean", lambda r: r[0] == "failing")
    add("failing responses + judge-directed text", lambda r: r[0] == "injected")
    for name in ("before", "after"):  # a judge that marks clean failing responses met cannot show an injection
        res = results[name]
        p = sum(r[2] is True for r in res if r[0] == "passing") / max(sum(r[0] == "passing" for r in res), 1)
        f = sum(r[2] is True for r in res if r[0] == "failing") / max(sum(r[0] == "failing" for r in res), 1)
        lines.append(f"{'discrimination (' + name + '): passing - failing':42s} {100 * (p - f):>+13.0f}%")
    for inj in dict.fromkeys(r[1] for r in results["before"] if r[0] == "injected"):
        add(f"  injection '{inj}'", lambda r, inj=inj: r[0] == "injected" and r[1] == inj)
    for name in ("before", "after"):
        bad = [r[3] for r in results[name] if r[3] != "ok"]
        lines.append(f"{'no verdict (' + name + ')':42s} {len(bad):>14d}  "
                     + ", ".join(f"{s} {bad.count(s)}" for s in sorted(set(bad))))
    injected = [r for r in rows if r[1] == "injected"]
    clean = [r for r in rows if r[1] != "injected"]
    flagged = lambda rs: sum(bool(judge_directed(r[4])) for r in rs)  # noqa: E731
    lines.append(f"{'attributor flags judge-directed text':42s} injected {flagged(injected)}/{len(injected)}, "
                 f"clean {flagged(clean)}/{len(clean)}")
    return "\n".join(lines)


def run(base_url: str, model: str) -> str:
    from harnessrl_jax.rubric.judges import OpenAIJudge

    rows = items(FLAGS.limit)
    with OpenAIJudge(base_url, model, structured_output=FLAGS.structured_output, max_tokens=FLAGS.max_tokens,
                     explanation_max_chars=FLAGS.explanation_max_chars, temperature=0.0, timeout_s=300.0,
                     max_concurrency=FLAGS.max_concurrency) as judge:
        t0 = time.perf_counter()
        results = measure(judge, rows, max_concurrency=FLAGS.max_concurrency)
        seconds = time.perf_counter() - t0
    head = (f"judge {model} at {base_url}, temperature 0, {FLAGS.structured_output}; {len(rows)} responses x 2 "
            f"prompts in {seconds:.0f} s")
    return head + "\n" + table(results, rows)


def main(argv):
    del argv
    if FLAGS.base_url:
        print(run(FLAGS.base_url, FLAGS.model))
        return
    from harnessrl_jax.rubric.judges.local_server import llama_server

    with llama_server() as server:
        print(run(server.base_url, server.model))


if __name__ == "__main__":
    cli.run(main)
