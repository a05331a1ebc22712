"""The site of the committed tree, built once per test session into a temporary folder (the
browser test and the builder's checks of the real tree share it)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def real_site(tmp_path_factory):
    from kgqa_lib.site import build

    return build(tmp_path_factory.mktemp("kgqa-site") / "site")
