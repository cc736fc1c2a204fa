"""A command-line setting, declared once on the dataclass field it fills: its help, choices, default and the
commands that take it (`Setting`); and the one generator that turns those fields into argparse options
(`add_arguments`). No option is declared by hand anywhere else. Standard library only: a rank loads
bench.spec.task, whose fields carry settings too."""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

# A Setting whose default is its field's (the generator fills it in); None is a default of its own.
FIELD_DEFAULT = object()
# An annotation's leading type -> what argparse converts the text with (str needs none).
_TYPES: dict[str, Callable | None] = {"int": int, "float": float, "str": None, "Path": Path}


@dataclass(frozen=True)
class Setting:
    """An option of the command line: `--field-name` unless `option` names it (several: aliases), its value
    under the field's name. A bool field is a switch; an int, float, str or Path field takes one value of that
    type. `commands` names the commands that take it (empty: every command that composes its layer); `vary`
    what differs on some of them (their own help or default), by command."""
    help: str | None = None
    option: str | tuple[str, ...] | None = None
    commands: tuple[str, ...] = ()
    choices: tuple | None = None
    metavar: str | None = None
    type: Callable | None = None
    default: object = FIELD_DEFAULT
    dest: str = ""  # the field's name: filled in by `declared`
    action: str | None = None  # store_false (a --no-... switch), append, version; a bool field's store_true
    nargs: str | None = None
    const: object = None
    required: bool = False
    positional: bool = False
    version: Callable[[], str] | None = None  # action version: the text, asked once the parser is built
    vary: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def takes(self, command: str) -> bool:
        return not self.commands or command in self.commands

    def on(self, command: str) -> Setting:
        """This setting as `command` takes it."""
        return dataclasses.replace(self, **self.vary.get(command, {})) if command in self.vary else self

    @property
    def options(self) -> tuple[str, ...]:
        if isinstance(self.option, tuple):
            return self.option
        return (self.option or "--" + self.dest.replace("_", "-"),)


def setting(help: str | None = None, **how) -> dict:
    """The field metadata that makes a field a setting (`Setting`)."""
    return {"setting": Setting(help, **how)}


def of(declared: dataclasses.Field) -> Setting | None:
    return declared.metadata.get("setting")


def declared(cls: type, given_only: bool = False, names: Iterable[str] | None = None) -> list[Setting]:
    """The settings of a dataclass's fields, in their order, each with its dest, type and default resolved.
    `given_only`: every default None (a task flag not given leaves the preset's value); `names` renames fields
    (a task field's flat name)."""
    renamed = dict(names or {})
    out = []
    for f in dataclasses.fields(cls):
        if (s := of(f)) is None:
            continue
        kind = str(f.type).split("|")[0].strip()
        default = s.default
        if default is FIELD_DEFAULT:
            default = None if given_only or f.default is dataclasses.MISSING else f.default
        if kind == "bool" and s.action is None:
            s = dataclasses.replace(s, action="store_true")
        elif s.type is None and s.action is None and kind in _TYPES:
            s = dataclasses.replace(s, type=_TYPES[kind])
        out.append(dataclasses.replace(s, dest=renamed.get(f.name, f.name), default=default))
    return out


def add_arguments(parser: argparse.ArgumentParser, settings: Iterable[Setting], command: str,
                  suppress_defaults: bool = False) -> None:
    """The one place options are added: each setting `command` takes, as it takes it. `suppress_defaults`:
    a value the command line does not give leaves the namespace's as it is (-v before or after the command)."""
    for s in (s.on(command) for s in settings if s.takes(command)):
        how: dict = {} if s.help is None else {"help": s.help}  # argparse's own help where none is given
        if s.action == "version":
            parser.add_argument(*s.options, action="version", version=s.version(), **how)
            continue
        if s.action:
            how["action"] = s.action
        if s.action not in ("store_true", "store_false"):
            how.update({k: v for k, v in (("type", s.type), ("choices", s.choices), ("metavar", s.metavar),
                                          ("nargs", s.nargs), ("const", s.const)) if v is not None})
        default = argparse.SUPPRESS if suppress_defaults else s.default
        if s.nargs in ("*", "+") and isinstance(default, tuple):
            default = list(default)  # argparse's own for a list of values
        if s.positional:  # no default given: argparse's own (a list of none of them is still required)
            parser.add_argument(s.dest, **how, **({} if default is None else {"default": default}))
            continue
        if s.required:
            how["required"] = True
        if s.action != "store_true" or default is not None:
            how["default"] = default
        parser.add_argument(*s.options, dest=s.dest, **how)


def parse(cls: type, argv: list[str] | None = None, description: str | None = None):
    """A process's own command line (a harness's child: the engine driver, the watchdog) read into `cls`, a
    dataclass of settings."""
    parser = argparse.ArgumentParser(description=description)
    add_arguments(parser, declared(cls), "")
    return cls(**vars(parser.parse_args(argv)))
