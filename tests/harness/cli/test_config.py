"""``--config FILE.toml`` / ``--print-config`` on ``run`` and ``bench``, and the CLI's
defaults read from the request dataclasses (one place per default)."""

from __future__ import annotations

import json
import re

import pytest
import tomllib

from dlbench.core import flags
from dlbench.core.errors import UserError
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cli import COMMANDS, build_parser, config
from dlbench.harness.pipeline.runner import RunRequest
from tests.utils import benchmodels
from tests.utils.clitools import assert_usage_error

FAST = {"min-duration": 0.1, "min-iterations": 3, "warmup": 1, "max-warmup": 2}


def parse(argv):
    return config.parse_args(build_parser(), argv)


def subparser(command):
    parser = build_parser()
    subs = next(a for a in parser._actions if a.dest == "command")
    return subs.choices[command]


def write(path, text):
    path.write_text(text)
    return str(path)


# -- the file becomes the command's options ---------------------------------------------


def test_file_keys_are_the_long_options_and_lists_are_accepted(tmp_path):
    f = write(
        tmp_path / "b.toml",
        'artifacts = ["m.onnx"]\nbackend = ["onnxruntime", "pytorch"]\n'
        "batch-sizes = [1, 8, 32]\nmin-duration = 1.5\nresume = true\n"
        'compile = "max-autotune"\n',
    )
    args = parse(["bench", "--config", f])
    # The namespace's names are the request's fields (core.flags): the file's keys are the flags'.
    assert args.artifacts == ["m.onnx"] and args.backends == ["onnxruntime", "pytorch"]
    assert args.batch_sizes == [1, 8, 32] and args.min_duration_s == 1.5 and args.resume is True
    from dlbench.harness.commands.bench import request_from

    assert request_from(args).options["compile"] == "max-autotune"  # a backend's option
    run = parse(
        ["run", "--config", write(tmp_path / "r.toml", 'model = "lenet5"\nframeworks = ["pytorch"]\n')]
    )
    assert run.model == "lenet5" and run.frameworks == ["pytorch"]


def test_the_command_line_overrides_the_file(tmp_path):
    f = write(tmp_path / "b.toml", 'artifacts = ["a.onnx"]\nbackend = ["pytorch"]\nwarmup = 7\nseed = 3\n')
    args = parse(["bench", "b.onnx", "--config", f, "-b", "onnxruntime", "--warmup", "1"])
    # A repeatable option given on the command line replaces the file's list, not extends it.
    assert args.artifacts == ["b.onnx"] and args.backends == ["onnxruntime"]
    assert args.warmup == 1 and args.seed == 3


def test_print_config_round_trips(tmp_path):
    """What --print-config prints, fed back through --config, resolves to the same."""
    f = write(
        tmp_path / "b.toml",
        'artifacts = ["m.onnx"]\nbackend = "onnxruntime"\n'
        'scenario = ["offline", "single-stream"]\ncv-threshold = 0.2\n'
        'shape = ["input=1x3x8x8"]\nno-progress = true\n',
    )
    first = config.resolved(parse(["bench", "--config", f, "--seed", "4"]))
    again = write(tmp_path / "again.toml", config.to_toml(first))
    second = config.resolved(parse(["bench", "--config", again]))
    assert first == second == tomllib.loads(config.to_toml(first))
    assert first["seed"] == 4 and first["quiet"] is True and first["backend"] == ["onnxruntime"]


@pytest.mark.parametrize(
    "text, needles",
    [
        ("batch-size = [1]\n", ["b.toml", "key 'batch-size': unknown", "valid keys:", "batch-sizes"]),
        ('io-binding = "sometimes"\n', ["key 'io-binding'", "choose from auto, on, off"]),
        ('warmup = "many"\n', ["key 'warmup'", "'many' is not an integer"]),
        ("warmup = 1.5\n", ["key 'warmup'", "'1.5' is not an integer"]),
        ('resume = "yes"\n', ["key 'resume'", "expected true or false"]),
        ("warmup = [1, 2]\n", ["key 'warmup'", "expected one int, got a list"]),
        ("warmup = \n", ["b.toml", "not valid TOML"]),
        # A TOML date became the text of a path option: the database "1979-05-27".
        ("db = 1979-05-27\n", ["key 'db'", "no option takes a TOML date", "1979-05-27"]),
        ("json = 07:32:00\n", ["key 'json'", "TOML date or time (07:32:00)"]),
    ],
)
def test_a_bad_file_is_one_line_naming_file_key_and_allowed_values(tmp_path, text, needles):
    f = write(tmp_path / "b.toml", text)
    with pytest.raises(UserError) as exc:
        config.read_config(f, subparser("bench"), COMMANDS)
    for n in needles:
        assert n in str(exc.value)


def test_a_commands_table_is_read_by_that_command_alone(tmp_path):
    """tune writes one file for bench and run, whose options differ: the keys they share at
    the top, each one's own in a table of its name, which the other command passes over."""
    f = write(
        tmp_path / "both.toml",
        'batch-sizes = [4]\nwarmup = 3\n\n[bench]\nbackend = ["onnxruntime"]\nwarmup = 4\n\n'
        '[run]\nmodel = "m.onnx"\nbackends = ["onnxruntime"]\n',
    )
    bench = config.read_config(f, subparser("bench"), COMMANDS)
    assert bench["batch_sizes"] == [4] and bench["backends"] == ["onnxruntime"]
    assert bench["warmup"] == 4  # its own table over the shared key
    assert "model" not in bench
    run = config.read_config(f, subparser("run"), COMMANDS)
    assert run["warmup"] == 3 and run["model"] == "m.onnx" and run["batch_sizes"] == [4]


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[benchmark]\nwarmup = 1\n", "[benchmark]: a table, and the only tables"),
        ("[bench]\ntrain-steps = 1\n", "[bench] key 'train-steps': unknown"),
        ('[bench]\nwarmup = "x"\n', "[bench] key 'warmup': 'x' is not an integer"),
    ],
)
def test_a_bad_table_is_one_line_naming_it(tmp_path, text, needle):
    with pytest.raises(UserError, match=re.escape(needle)):
        config.read_config(write(tmp_path / "t.toml", text), subparser("bench"), COMMANDS)


def test_bad_file_through_the_cli(cli, workdir, tmp_path):
    f = write(tmp_path / "b.toml", "batch-size = 3\n")
    assert_usage_error(
        cli("bench", "m.onnx", "-b", "onnxruntime", "--config", f),
        "dlbench bench: error:",
        "b.toml: key 'batch-size': unknown; valid keys: ",
        "backend, backend-option, batch-sizes",
    )
    # A value the request refuses (not argparse) still names the file and the key.
    f = write(tmp_path / "r.toml", 'model = "lenet5"\nprecisions = ["fp32", "int9"]\n')
    assert_usage_error(
        cli("run", "--config", f, "--print-config"),
        "r.toml: key 'precisions'",
        "choose from fp32, fp16, int8",
    )
    assert_usage_error(
        cli("run", "lenet5", "--config", str(tmp_path / "none.toml")), "none.toml: cannot read it"
    )


def test_bench_print_config_validates_stores_nothing_and_round_trips(cli, workdir):
    mlp = benchmodels.mlp(workdir / "mlp.onnx")
    f = write(workdir / "b.toml", f'artifacts = ["{mlp}"]\nbackend = ["onnxruntime"]\nbatch-sizes = [1, 2]\n')
    out = cli("bench", "--config", f, "--warmup", "3", "--print-config")
    assert out.returncode == 0, out.stderr
    printed = tomllib.loads(out.stdout)
    assert printed["warmup"] == 3 and printed["batch-sizes"] == [1, 2]
    assert not (workdir / "results.sqlite").exists()
    back = cli("bench", "--config", write(workdir / "p.toml", out.stdout), "--print-config")
    assert back.returncode == 0 and back.stdout == out.stdout
    bad = cli("bench", "--config", f, "--backend", "nosuch", "--print-config")
    assert bad.returncode == 2


def test_run_print_config_round_trips(cli, workdir):
    out = cli("run", "lenet5", "--frameworks", "pytorch", "--batch-sizes", "1,4", "--print-config")
    assert out.returncode == 0, out.stderr
    assert tomllib.loads(out.stdout)["model"] == "lenet5"
    back = cli("run", "--config", write(workdir / "r.toml", out.stdout), "--print-config")
    assert back.returncode == 0 and back.stdout == out.stdout
    assert not (workdir / "runs").exists()


def test_bench_records_carry_the_resolved_config(cli, workdir):
    mlp = benchmodels.mlp(workdir / "mlp.onnx")
    body = "".join(f"{k} = {v}\n" for k, v in FAST.items())
    f = write(workdir / "b.toml", f'artifacts = ["{mlp}"]\nbackend = ["onnxruntime"]\n{body}')
    out = cli("bench", "--config", f, "--seed", "5", "--json", "b.json", "--quiet")
    assert out.returncode == 0, out.stderr[-2000:]
    [record] = json.loads((workdir / "b.json").read_text())
    cfg = record["context"]["config"]
    assert cfg["seed"] == 5 and cfg["backend"] == ["onnxruntime"] and cfg["warmup"] == 1
    assert cfg["artifacts"] == [str(mlp)]


def test_run_workdir_keeps_the_config(workdir):
    from dlbench.harness.pipeline.resume import open_workdir
    from dlbench.harness.pipeline.runner import workdir_of

    cfg = {"model": "lenet5", "seed": 2}
    req = RunRequest(model="lenet5", workdir=str(workdir / "w"), config=cfg)
    wd = workdir_of(req)
    _, resumed = open_workdir(req, wd)
    assert not resumed and wd.read_run()["config"] == cfg


# -- one place per default ----------------------------------------------------------------

RULE_FIELDS = {
    "warmup": "warmup",
    "max_warmup": "max_warmup",
    "min_iterations": "min_iterations",
    "min_duration": "min_duration_s",
    "iterations": "iterations",
}
# bench's options are declared on its request's fields (core.flags): each dest is the field.
BENCH_RULE_FIELDS = {f: f for f in RULE_FIELDS.values()}
BENCH_FIELDS = {
    "device_id": "device_id",
    "batch_sizes": "batch_sizes",
    "repeats": "repeats",
    "iqr_threshold": "iqr_threshold",
    "repeat_spread_threshold": "repeat_spread_threshold",
    "seed": "seed",
    "max_wait_ms": "max_wait_ms",
    "latency_bound_ms": "latency_bound_ms",
    "model": "model",
    "timeout": "timeout",
    "resume": "resume",
    "db": "db",
    "json_path": "json_path",
    "allocator": "allocator",
    "executor": "executor",
}
RUN_FIELDS = {
    "frameworks": "frameworks",
    "backends": "backends",
    "precisions": "precisions",
    "batch_sizes": "batch_sizes",
    "train_steps": "train_steps",
    "warmup_steps": "warmup_steps",
    "train_batch_size": "train_batch_size",
    "device": "device",
    "threads": "threads",
    "seed": "seed",
    "workdir": "workdir",
    "resume": "resume",
    "retry": "retry",
    "db": "db",
    "timeout": "timeout",
    "allocator": "allocator",
    "executor": "executor",
}
RUN_RULE = config.field_default(RunRequest, "rule")
CASES = (
    [("bench", d, config.field_default(BenchRequest, f)) for d, f in BENCH_FIELDS.items()]
    + [("bench", d, config.field_default(StopRule, f)) for d, f in BENCH_RULE_FIELDS.items()]
    + [("run", d, config.field_default(RunRequest, f)) for d, f in RUN_FIELDS.items()]
    + [("run", d, getattr(RUN_RULE, f)) for d, f in BENCH_RULE_FIELDS.items()]
)


@pytest.mark.parametrize("command, dest, expected", CASES, ids=[f"{c}--{d}" for c, d, _ in CASES])
def test_cli_default_is_the_dataclass_default(command, dest, expected):
    action = next(a for a in subparser(command)._actions if a.dest == dest)
    assert action.default == config.cli_form(expected)
    if expected not in (None, False):  # and --help shows that value
        assert flags.show(expected) in action.help % {"default": action.default}


@pytest.mark.parametrize(
    "command, covered",
    [
        ("bench", set(BENCH_FIELDS) | set(BENCH_RULE_FIELDS)),
        ("run", set(RUN_FIELDS) | set(BENCH_RULE_FIELDS)),
    ],
)
def test_no_option_writes_a_default_of_its_own(command, covered):
    """An option with a real default must take it from a dataclass (listed above)."""
    own = {
        a.dest
        for a in subparser(command)._actions
        if a.default not in (None, False, [], "==SUPPRESS==") and a.dest not in covered
    }
    assert own <= {"help", "_config_parser"}, own


def test_the_run_uses_its_own_stop_rule_not_benchs():
    assert subparser("run")._option_string_actions["--warmup"].default == RUN_RULE.warmup
    assert RUN_RULE != StopRule()  # otherwise the test above could not tell them apart


def test_field_default_names_what_is_missing():
    with pytest.raises(KeyError):
        config.field_default(BenchRequest, "nosuch")
    with pytest.raises(KeyError):
        config.field_default(BenchRequest, "artifacts")
