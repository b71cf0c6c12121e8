"""The workspace tools and their three parsers."""

import pytest

from harnessrl_jax.agentic.tools import SCHEMAS, Call, execute, parse, render_call

CALLS = [Call("ls"), Call("ls", ("docs",)), Call("cat", ("docs/a.txt",)), Call("write", ("docs/a.txt", "hi there")),
         Call("append", ("docs/a.txt", "more")), Call("replace", ("docs/a.txt", "hi", "yo")), Call("done", ("42",))]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_call_written_in_a_schema_parses_back_to_itself(schema):
    """A parser that drops or reorders an argument, or misses a command, fails here."""
    for call in CALLS:
        text = "I will do it.\n" + render_call(call, schema) + "\nthanks"
        assert parse(text, schema) == call, (schema, text)


def test_a_call_in_another_schema_or_malformed_is_not_a_call():
    """Each harness accepts only its own syntax: a JSON call under the XML schema, a broken call, no call."""
    assert parse(render_call(Call("cat", ("a.txt",)), "json"), "xml") is None
    assert parse('{"tool": "write", "args": ["a.txt"]}', "json") is None  # write needs two arguments
    assert parse('{"tool": "rm", "args": ["a.txt"]}', "json") is None
    assert parse("<write>no path</write>", "xml") is None
    assert parse("please write the file", "cli") is None
    assert parse("", "json") is None


def test_execute_is_pure_and_each_command_does_what_it_says():
    files = {"docs/a.txt": "one", "src/b.txt": ""}
    out = execute(files, Call("append", ("docs/a.txt", "two")))
    assert out.files["docs/a.txt"] == "one\ntwo" and files["docs/a.txt"] == "one"  # the input is never mutated
    assert execute(files, Call("ls", ("docs",))).output == "docs/a.txt"
    assert execute(files, Call("ls")).output == "docs/a.txt src/b.txt"
    assert execute(files, Call("cat", ("docs/a.txt",))).output == "one"
    assert execute(files, Call("cat", ("nope.txt",))).output == "error: no file nope.txt"
    assert execute(files, Call("replace", ("docs/a.txt", "on", "ON"))).files["docs/a.txt"] == "ONe"
    assert execute(files, Call("replace", ("docs/a.txt", "zz", "y"))).output.startswith("error")
    assert execute(files, Call("write", ("new.txt", "x"))).files == {**files, "new.txt": "x"}
    done = execute(files, Call("done", (" 7 ",)))
    assert done.answer == "7" and done.files == files
