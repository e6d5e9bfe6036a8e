"""specserve/generate/pins.py's in-place rewrite: only the pinned value changes, never the layout
around it, and a file that lost the pin's line is refused with a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserve.generate import pins
from specserve.generate.command import run
from tests import generated_tree

VALUES = """\
# comment kept
image:
  # -- The image.
  repository: old/repo  # trailing comment kept
  tag: "1.0"
list:
  - image:
      tag: 1.0-in-a-list
notes: |
  image:
    tag: in-a-block-scalar
router:
  image:
    tag: '2.0'
"""


def _pin(key: str) -> pins.Pin:
    return pins.Pin("values.yaml", key, "unused")


def test_only_the_values_change_with_their_quoting_and_comments() -> None:
    written = pins.rewrite(VALUES, {_pin("image.repository"): "new/repo",
                                    _pin("image.tag"): "1.1",
                                    _pin("router.image.tag"): "it's"})  # fmt: skip
    assert written == VALUES.replace("old/repo  #", "new/repo  #").replace('"1.0"', '"1.1"') \
        .replace("'2.0'", "'it''s'")  # fmt: skip


def test_a_plain_value_yaml_would_read_as_another_type_is_quoted() -> None:
    text = "version: 1.1.7\n"
    assert pins.rewrite(text, {_pin("version"): "1.10"}) == 'version: "1.10"\n'
    assert pins.rewrite(text, {_pin("version"): "1.2.0"}) == "version: 1.2.0\n"


def test_keys_in_lists_and_block_scalars_are_not_the_pin() -> None:
    # `list.-.image.tag` and the block scalar's text are not `image.tag`: only one line matches.
    written = pins.rewrite(VALUES, {_pin("image.tag"): "9"})
    assert "tag: 1.0-in-a-list" in written and "tag: in-a-block-scalar" in written
    with pytest.raises(pins.PinError, match=r"no one-line value at 'list\.image\.tag'"):
        pins.rewrite(VALUES, {_pin("list.image.tag"): "9"})
    with pytest.raises(pins.PinError, match=r"no one-line value at 'notes\.image\.tag'"):
        pins.rewrite(VALUES, {_pin("notes.image.tag"): "9"})


def test_a_key_without_a_one_line_value_is_refused() -> None:
    with pytest.raises(pins.PinError, match="no one-line value at 'image'"):
        pins.rewrite(VALUES, {_pin("image"): "x"})
    with pytest.raises(pins.PinError, match=r"no one-line value at 'missing\.tag'"):
        pins.rewrite(VALUES, {_pin("missing.tag"): "x"})


def test_a_rewrite_that_would_change_more_than_the_value_is_refused() -> None:
    # A key inside a flow mapping written over two lines reads as a block key to the line-level
    # edit, which would cut the mapping's closing brace: refused, not written.
    text = "a: {x: 1,\n  b: 2}\n"
    with pytest.raises(pins.PinError, match="would change more than their values"):
        pins.rewrite(text, {_pin("a.b"): "3"})


def test_every_arg_line_of_a_dockerfile_is_rewritten() -> None:
    text = "ARG V=1\nFROM x\nARG V=1\nARG VERSION=1\n"
    pin = pins.Pin("docker/x/Dockerfile", "V", "unused")
    assert pins.rewrite(text, {pin: "2"}) == "ARG V=2\nFROM x\nARG V=2\nARG VERSION=1\n"
    assert pins.held(text, pin) == {"1"}
    with pytest.raises(pins.PinError, match=r"no 'ARG W=\.\.\.' line"):
        pins.rewrite(text, {pins.Pin("docker/x/Dockerfile", "W", "unused"): "2"})


def test_a_lost_pin_line_is_a_one_line_error_of_generate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = generated_tree.copy(tmp_path)
    defaults = root / "ansible/roles/weights/defaults/main.yml"
    defaults.write_text(defaults.read_text().replace("weights_hf_hub_version:", "# gone:"))
    assert run(root, check=True) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "ansible/roles/weights/defaults/main.yml has no one-line value at " \
        "'weights_hf_hub_version'" in err  # fmt: skip
