import pytest

from bayespmf.cli import main
from bayespmf.spec import SpecError, load_spec


def write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_shipped_specs_are_valid():
    import pathlib

    specs = sorted(pathlib.Path(__file__).parents[1].joinpath("models").glob("*.toml"))
    assert specs, "models/ must ship specifications"
    for p in specs:
        spec = load_spec(p)
        assert spec.data["name"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            '[data]\nname = "car"\n[fit]\nrnak = 3\n',
            r"unknown key 'fit\.rnak'\. Did you mean 'rank'",
        ),
        (
            '[data]\nname = "car"\n[fitt]\nrank = 3\n',
            r"unknown section \[fitt\]\. Did you mean 'fit'",
        ),
        ('[data]\nname = "car"\n[fit]\nrank = "3"\n', r"'fit\.rank' must be of type int"),
        ('[data]\nname = "car"\n[fit]\nrank = 0\n', r"'fit\.rank' must be >= 1"),
        ('[data]\nname = "cars"\n', r"'data\.name'.*Did you mean 'car'"),
        ("[fit]\nrank = 3\n", r"missing section \[data\]"),
        ("[data]\n", r"missing required key 'data\.name'"),
        ("[data\nname=", "not valid TOML"),
    ],
)
def test_bad_specs_fail_with_key_and_file(tmp_path, text, match):
    p = write(tmp_path, text)
    with pytest.raises(SpecError, match=match) as info:
        load_spec(p)
    assert str(p) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "nope.toml")


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    p = write(tmp_path, '[data]\nname = "car"\n[fit]\nrnak = 3\n')
    assert main(["run", str(p)]) == 2
    err = capsys.readouterr().err
    assert "bayespmf: error:" in err and "rnak" in err


def test_cli_datasets(capsys):
    assert main(["datasets", "votes"]) == 0
    assert "Congressional" in capsys.readouterr().out
    assert main(["datasets", "vote"]) == 2
    assert "Did you mean 'votes'" in capsys.readouterr().err
