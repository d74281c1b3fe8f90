"""Scenario families beyond captures/recorder/, one module each, registered by `import recorder`
(`recorder.load_scenario_families`, in name order). A module imports the harness as
`import recorder as record` and registers with `@record.scenario(...)`."""
