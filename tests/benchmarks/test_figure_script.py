"""figure_script writes what json_script writes for a figure: the same element, the same JSON, markup escaped."""

import json

from django.utils.html import json_script

from apps.benchmarks.templatetags.benchmark_figures import figure_script


def test_figure_script_reads_back_as_json_script_does_and_escapes_markup():
    value = {"data": [{"z": [[1.5, None]], "name": "</script><b>&"}], "layout": {"title": "a > b"}}

    ours, django = str(figure_script(value, "fig")), str(json_script(value, "fig"))

    def inner(html):
        return html.removeprefix('<script id="fig" type="application/json">').removesuffix("</script>")

    assert ours.startswith('<script id="fig" type="application/json">') and ours.endswith("</script>")
    assert "<" not in inner(ours) and ">" not in inner(ours) and "&" not in inner(ours)
    assert json.loads(inner(ours)) == json.loads(inner(django)) == value
