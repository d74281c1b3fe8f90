"""The tests `make check` leaves out, marked `slow` by tests/conftest.py: `make check-all` and
`make test` run them (issue 45: the fast loop in under 3 minutes on 2 cores).

Chosen from one `--durations=0` run of the former `make check` set (docs/developer/first-run.md):
the oracle runs that start a program per test (Chromium, PlantUML's JVM), the bench runs, the
sweeps of the whole capture corpus (the fast loop keeps their SAMPLE cases), and the single
tests that took over ~2 s idle (about 4 s in that run, on a machine loaded 5 to 8): big
synthesized inputs, property runs, memory bounds, tmux, rotated and piped whole reads. The
names are checked against the tests (tests/test_check_selection.py), so a rename cannot leave
a stale entry behind, nor a sweep without a case in the fast loop, nor a layer without a test.
"""

from __future__ import annotations

#: whole files: Chromium (the report page, its plots and filter, the Mermaid diagrams),
#: PlantUML's JVM, the benches' small runs
FILES = frozenset(
    {
        "tests/test_bench.py",
        "tests/test_bench_logs.py",
        "tests/test_docs_diagram.py",
        "tests/test_mermaid.py",
        "tests/test_plantuml.py",
        "tests/test_report_browser.py",
        "tests/test_report_filter.py",
        "tests/test_report_plots_browser.py",
    }
)

#: the cases of a corpus sweep that `make check` keeps: one capture of each protocol
SAMPLE = ("091-publish-consume", "10-send-receive")

#: tests run over every bundled capture (a case a capture): slow but for the SAMPLE cases
SWEEPS = frozenset(
    {
        "tests/test_amqp091_vs_tshark.py::test_arguments_headers_and_bodies_equal_wiresharks",
        "tests/test_amqp10_vs_tshark.py::test_fields_equal_wiresharks",
        "tests/test_lossy_captures.py::test_a_dropped_packet_makes_up_no_error",
        "tests/test_summary_words.py::test_no_summary_value_is_printed_as_json",
        "tests/test_timeline_ansi.py::test_every_capture_as_rich_prints_it_on_a_terminal",
        "tests/test_timeline_plain.py::test_every_capture_as_rich_prints_it",
        "tests/test_timeline_plain.py::test_read_piped_prints_what_rich_printed",
        "tests/test_transport.py::test_each_transport_record_is_the_tcp_end_tshark_sees",
        "tests/test_tree_vs_tshark.py::test_every_wireshark_field_is_a_node_at_the_same_bytes",
        "tests/test_vs_tshark.py::test_frames_equal_wiresharks",
    }
)

#: single tests (every case of a parametrized one) over ~2 s
TESTS = frozenset(
    {
        "tests/test_amqp091_decoder.py::test_damaged_payloads_become_findings_never_exceptions",
        "tests/test_amqp091_decoder.py::test_random_arguments_decode_to_the_values_pika_encoded",
        "tests/test_amqp091_decoder.py::test_random_properties_decode_to_the_values_pika_encoded",
        "tests/test_cli.py::test_completion_of_commands_options_choices_and_files",
        "tests/test_cli.py::test_every_command_has_help_with_examples",
        "tests/test_docs.py::test_the_docs_site_builds_with_warnings_as_errors",
        "tests/test_live.py::test_replayed_load_every_frame_decoded_and_counted",
        "tests/test_live_spool.py::test_a_killed_live_takes_its_tool_along_and_the_next_removes_its_spool",
        "tests/test_logs_cached_shapes.py::test_a_line_reads_the_same_after_lines_of_its_shape",
        "tests/test_logs_compressed.py::test_cut_short_compressed_log_is_a_finding",
        "tests/test_logs_goamqp.py::test_go_amqp_text_reads_back",
        "tests/test_logs_lines.py::test_timestamp_is_the_regex_search",
        "tests/test_logs_pika_cache.py::test_cached_reads_equal_uncached",
        "tests/test_logs_pika_cache.py::test_numbers_are_split_as_the_pattern_splits_them",
        "tests/test_logs_pika_property.py::test_pika_reprs_read_as_pika_marshals",
        "tests/test_logs_proton.py::test_a_line_is_split_as_its_pattern_splits_it",
        "tests/test_logs_proton_property.py::test_new_form_as_value_dump_prints_it",
        "tests/test_logs_proton_property.py::test_old_form_as_proton_prints_it",
        "tests/test_logs_rhea.py::test_a_line_is_split_as_its_pattern_splits_it",
        "tests/test_logs_rhea.py::test_a_payload_is_read_as_its_pattern_reads_it",
        "tests/test_oracles_required.py::test_a_missing_oracle_is_a_skip_and_under_make_test_a_failure",
        "tests/test_otlp.py::test_an_endpoint_that_does_not_answer_is_one_line_and_exit_1",
        "tests/test_report.py::test_a_100k_frame_capture_stays_under_5_mb",
        "tests/test_retire.py::test_bundled_captures_say_the_same",
        "tests/test_retire.py::test_damaged_and_regression_captures_say_the_same",
        "tests/test_retire.py::test_many_connections_say_the_same",
        "tests/test_retire.py::test_memory_per_ended_connection_is_bounded",
        "tests/test_rotated.py::test_pieces_of_mixed_formats_and_gzip",
        "tests/test_rotated.py::test_the_pieces_read_together_are_the_whole",
        "tests/test_schema_bundled.py::test_check_jsonschema_validates_offline_with_the_printed_schemas",
        "tests/test_stdin.py::test_a_fifo_reads_as_the_file_does",
        "tests/test_stdin.py::test_damaged_captures_read_from_a_pipe_as_from_the_file",
        "tests/test_summary_plain.py::test_awkward_text_anywhere_is_rich_text_or_left_to_rich",
        "tests/test_terminal.py::test_no_progress_bar_when_piped_or_for_json",
        "tests/test_terminal.py::test_progress_bar_on_a_long_file_then_gone",
        "tests/test_timeline_plain.py::test_hostile_text_anywhere_is_written_as_rich_writes_it",
        "tests/test_timing_hygiene.py::test_property_tests_have_no_deadline_and_a_seed_named_on_failure",
        "tests/test_track_amqp091_bulk.py::test_bulk_100k_messages_are_all_accounted_for",
        "tests/test_tui.py::test_w_writes_what_read_w_writes_a_frame_of_two_packets_whole",
        "tests/test_tui_diagnoses.py::test_live_d_lists_a_consumer_stalled_while_the_capture_runs",
        "tests/test_tui_live.py::test_live_keylog_decrypts_and_w_cuts_with_it",
        "tests/test_tui_snapshots.py::test_errors_filtered_with_detail",
        "tests/test_tui_terminal.py::test_a_million_frames_open_scroll_to_the_end_and_quit",
        "tests/test_tui_terminal.py::test_opens_helps_and_quits_with_q_and_ctrl_c",
        "tests/test_tui_write.py::test_w_asks_before_it_replaces_a_file",
        "tests/test_tui_write.py::test_w_names_the_file_it_could_not_write",
        # the guard of this list: it collects the whole suite once
        "tests/test_check_selection.py::test_make_check_selects_a_test_of_every_layer_and_sweep",
    }
)


def is_slow(nodeid: str) -> bool:
    """Whether the test `nodeid` (tests/test_x.py::test_name[case]) is one `make check` skips."""
    path, _, rest = nodeid.partition("::")
    if path in FILES:
        return True
    name, _, case = rest.partition("[")
    test = f"{path}::{name}"
    if test in TESTS:
        return True
    return test in SWEEPS and not any(sample in case for sample in SAMPLE)
