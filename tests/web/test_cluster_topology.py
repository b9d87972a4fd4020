"""The Cluster page shows how GPUs are linked (issue 22, point 6): the node's NVLink groups and features, and
each GPU's NVLink group and GPU features, on a server with declared GPUs whose groups config.toml gives."""

from __future__ import annotations

import os

from tests.web.conftest import screenshot

ROOMY = ["--cpus", "16", "--mem", "64G"]


def test_the_cluster_page_shows_each_gpus_nvlink_group_and_the_nodes_features(server_factory, short_tmp, page):
    home = os.path.join(short_tmp, "linked")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('[node]\nnvlink = ["0-3", "4-7"]\ngpu_features = {fast = "6-7"}\n')
    server = server_factory(gpus=8, extra=ROOMY, home=home)

    page.goto(server.url + "/")
    links = page.locator("[data-testid=node-links]")
    links.wait_for()
    # the GPUs' type is a feature too, as --constraint=a100 takes it
    assert links.inner_text() == "NVLink groups 0-3 · 4-7 · features: a100, fast, nvlink"
    assert "GPU0: X NV NV NV SYS SYS SYS SYS" in links.get_attribute("title")
    cards = page.locator("[data-testid=gpu-card]")
    assert [cards.nth(i).get_attribute("data-nvlink") for i in range(8)] == ["0-3"] * 4 + ["4-7"] * 4
    assert cards.nth(2).locator("[data-testid=gpu-links]").inner_text() == "NVLink group 0-3"
    assert cards.nth(7).locator("[data-testid=gpu-links]").inner_text() == "NVLink group 4-7 fast"
    screenshot(page, "cluster-topology")


def test_a_node_without_known_links_shows_no_topology_only_its_features(server_factory, page):
    server = server_factory(gpus=2, extra=ROOMY)
    page.goto(server.url + "/")
    page.locator("[data-testid=gpu-card]").first.wait_for()
    assert page.locator("[data-testid=node-links]").inner_text() == "features: a100"  # not "No NVLink": unknown
    assert page.locator("[data-testid=gpu-links]").count() == 0
