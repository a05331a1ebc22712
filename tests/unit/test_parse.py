from hypothesis import given, settings, strategies as st

from kgqa_lib.llm.parse import extract_braced_answers


def test_braced_answers():
    assert extract_braced_answers("{Christopher Nolan}").items == ["Christopher Nolan"]
    p = extract_braced_answers("Nolan made {Inception}.\nAnswer: {Roma}, {Gravity}")
    assert p.items == ["Roma", "Gravity"] and p.ok


def test_fallbacks_are_counted():
    p = extract_braced_answers("Answer: Roma and Gravity")
    assert p.items == ["Roma", "Gravity"] and p.error == "no_braces"
    p = extract_braced_answers("I believe it is Nolan")
    assert p.error == "no_answer_marker"
    assert extract_braced_answers("").error == "empty"
    assert extract_braced_answers(None).error == "empty"


def test_template_leaks_and_placeholders():
    assert extract_braced_answers("Answer: {A}<|im_end|>").items == ["A"]
    assert extract_braced_answers("{Name}").items == ["Name"]  # the placeholder echoed: fallback text
    assert extract_braced_answers("{Name}").error == "no_answer_marker"
    assert extract_braced_answers("{1989}, {1989}").items == ["1989"]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_total_on_any_text(text):
    p = extract_braced_answers(text)
    assert isinstance(p.items, list) and all(isinstance(x, str) and x for x in p.items)
