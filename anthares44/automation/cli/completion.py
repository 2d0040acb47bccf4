"""Shell completion scripts for `a44`, generated from the argument parser itself, so every group, verb, option and
option choice the CLI accepts is offered and nothing else: `a44 completion bash|zsh|fish`.

The parser tree is flattened into a table: for each command path (`automation dlq`), its sub-commands, its options
and the choices of options that take a fixed set of values. Each script holds the table and a small function that
finds the current path from the words typed so far. zsh uses the bash script through `bashcompinit`.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")


@dataclass
class Node:
    commands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    choices: dict[str, list[str]] = field(default_factory=dict)   # option -> its values


def table(parser: argparse.ArgumentParser) -> dict[str, Node]:
    """Every command path ('' for `a44` itself, 'automation lint', ...) and what may follow it."""
    out: dict[str, Node] = {}

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        node = out[path] = Node()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    node.commands.append(name)
                    walk(sub, f"{path} {name}".strip())
            elif action.option_strings:
                longs = [o for o in action.option_strings if o.startswith("--")] or action.option_strings
                node.options.extend(longs)
                if action.choices:
                    for o in longs:
                        node.choices[o] = [str(c) for c in action.choices]

    walk(parser, "")
    return out


def _words(values) -> str:
    return shlex.quote(" ".join(values))


def bash(nodes: dict[str, Node]) -> str:
    sub = "\n".join(f"        {shlex.quote(p)}) echo {_words(n.commands)} ;;" for p, n in nodes.items() if n.commands)
    opts = "\n".join(f"        {shlex.quote(p)}) echo {_words(n.options)} ;;" for p, n in nodes.items())
    choices = "\n".join(f"        {shlex.quote(p + ' ' + o)}) echo {_words(v)} ;;"
                        for p, n in nodes.items() for o, v in n.choices.items())
    return f"""# a44 completion for bash: add `eval "$(a44 completion bash)"` to ~/.bashrc
_a44_commands() {{
    case "$1" in
{sub}
    esac
}}
_a44_options() {{
    case "$1" in
{opts}
    esac
}}
_a44_choices() {{
    case "$1" in
{choices}
    esac
}}
_a44() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" path="" w i
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        case "$w" in -*) continue ;; esac
        if [[ " $(_a44_commands "$path") " == *" $w "* ]]; then path="${{path:+$path }}$w"; fi
    done
    local values
    values="$(_a44_choices "$path $prev")"
    if [[ -n "$values" ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
    elif [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(_a44_options "$path")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(_a44_commands "$path")" -- "$cur"))
    fi
}}
complete -o default -F _a44 a44
"""


def zsh(nodes: dict[str, Node]) -> str:
    return ("# a44 completion for zsh: add `eval \"$(a44 completion zsh)\"` to ~/.zshrc\n"
            "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash(nodes).split("\n", 1)[1])


def fish(nodes: dict[str, Node]) -> str:
    def cases(pick) -> str:
        return "\n".join(f"        case {shlex.quote(p)}\n            printf '%s\\n' {' '.join(map(shlex.quote, v))}"
                         for p, v in pick if v)

    return f"""# a44 completion for fish: a44 completion fish > ~/.config/fish/completions/a44.fish
function __a44_commands
    switch "$argv[1]"
{cases((p, n.commands) for p, n in nodes.items())}
    end
end
function __a44_options
    switch "$argv[1]"
{cases((p, n.options) for p, n in nodes.items())}
    end
end
function __a44_choices
    switch "$argv[1]"
{cases((p + ' ' + o, v) for p, n in nodes.items() for o, v in n.choices.items())}
    end
end
function __a44_complete
    set -l words (commandline -opc)
    set -e words[1]
    set -l cur (commandline -ct)
    set -l path ''
    for w in $words
        string match -q -- '-*' $w; and continue
        if contains -- $w (__a44_commands "$path")
            set path (string trim -- "$path $w")
        end
    end
    set -l values
    if test (count $words) -gt 0
        set values (__a44_choices "$path $words[-1]")
    end
    if test (count $values) -gt 0
        printf '%s\\n' $values
    else if string match -q -- '-*' "$cur"
        __a44_options "$path"
    else
        __a44_commands "$path"
    end
end
complete -c a44 -f -a '(__a44_complete)'
"""


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](table(parser))
