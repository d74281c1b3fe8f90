"""The TUI's pop-ups: help, a one-line prompt (go to frame, write to file), a yes-or-no
question (overwrite a file), the diagnoses."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from amqpscope.render.lines import safe

HELP = """\
amqpscope tui — keys (the mouse works too: click a row, a node, scroll)

  /        display filter (read -Y's language); Enter applies, empty clears it
  Esc      every frame again (leaves a filter or a follow; n / N still search)
  n / N    next / previous frame the filter accepts
  e / E    next / previous frame with a finding
  g        go to frame number
  d        diagnoses; Enter jumps to the evidence frame
  f        follow the delivery of the selected frame (transfer, disposition,
           deliver, get-ok, their content, ack / nack / reject) and the same
           message's other deliveries (a redelivery and the delivery before it);
           on a publish (or its content): the publish, its return and confirm,
           and the message's deliveries
  w        write the shown frames' packets to a pcap file (asks before it
           replaces a file; never the capture being read)
  Tab      move between the tree, the frame list and the detail
  ↑ ↓ PgUp PgDn Home End   move in the frame list
  ?        this help          q  quit
Selecting a node in the tree (left) filters the list to its frames.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter", "dismiss", "Close")
    ]

    def compose(self) -> ComposeResult:
        yield Static(Text(HELP), id="help")


class PromptScreen(ModalScreen[str | None]):
    """One line asked for: the answer, or None on Esc."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, value: str = "") -> None:
        super().__init__()
        self.question = question
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt"):
            yield Static(Text(self.question))
            yield Input(value=self.value, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def counted(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


class ConfirmScreen(ModalScreen[bool]):
    """A yes-or-no question: y answers True; n, Esc or Enter False (the safe answer)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape,enter", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(Text(safe(self.question) + "  [y/N]"), id="prompt")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class DiagnosesScreen(ModalScreen[int | None]):
    """The diagnoses, then `notes` (`seams.diagnoses`: the input's own findings, a log's bad
    lines; while `reading`, the trackers' findings so far), each counted as what it is; Enter
    answers the first evidence frame's number."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,d,q", "cancel", "Close")]

    def __init__(
        self,
        diagnoses: list[dict[str, Any]],
        notes: list[dict[str, Any]] | None = None,
        reading: bool = False,
    ) -> None:
        super().__init__()
        self.diagnoses = [*diagnoses, *(notes or ())]
        head = counted(len(diagnoses), "diagnosis", "diagnoses")
        if reading:
            head += " so far (the rest when the input ends)"
        if notes and reading:
            head += " · " + counted(len(notes), "finding", "findings")
        elif notes:
            head += " · " + counted(len(notes), "note on the input", "notes on the input")
        self.head = head + " — Enter: evidence"

    def compose(self) -> ComposeResult:
        options = []
        for i, entry in enumerate(self.diagnoses):
            evidence = entry.get("evidence") or []
            where = f"frame {evidence[0]}" if evidence else "no frame"
            conn = f"c{entry['conn']} " if entry.get("conn") is not None else ""
            line = Text()
            line.append(f"{entry.get('severity', ''):<7} ", style="bold")
            line.append(safe(f"{entry.get('title', '')}  {conn}{where}") + "\n")
            line.append(safe(str(entry.get("explanation", ""))), style="dim")
            options.append(Option(line, id=str(i)))
        with Vertical(id="diagnoses-box"):
            yield Static(Text(self.head), id="diagnoses-head")
            if options:
                yield OptionList(*options, id="diagnoses")
            else:
                yield Static(Text("nothing found"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        entry = self.diagnoses[int(event.option.id or 0)]
        evidence = entry.get("evidence") or []
        if evidence:
            self.dismiss(int(evidence[0]))
        else:
            self.notify("this one has no evidence frame", severity="warning", markup=False)

    def action_cancel(self) -> None:
        self.dismiss(None)
