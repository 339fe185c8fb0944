"""The attribute vocabulary: which attribute a word is a value of (memory.topics.values)."""

from __future__ import annotations

from memory.conversation.terms import attribute_of
from memory.topics.values import asked_attributes, senses, senses_of, vocabulary_of, zh_values_in


def test_kinds_of_one_attribute_share_it_and_other_attributes_differ():
    assert attribute_of("college") == attribute_of("museum") == "attraction type"
    assert attribute_of("scottish") == attribute_of("italian") == "food"
    assert attribute_of("expensive") == attribute_of("cheap") == "price range"
    assert attribute_of("museum") != attribute_of("italian")
    assert attribute_of("restaurant") is None  # a matter's own name is no value


def test_a_word_is_found_in_any_of_its_forms():
    assert attribute_of("Museums") == "attraction type"
    assert attribute_of("moderately") == "price range"


def test_a_whole_value_decides_and_a_word_two_attributes_claim_alike_tells_none():
    words = vocabulary_of(
        {
            "area": ["north", "south"],
            "food": ["north american", "modern european", "the brasserie"],
            "attraction type": ["modern art", "museum"],
        }
    )
    assert words["north"] == "area"  # a whole value, though part of a cuisine too
    assert words["american"] == "food"
    assert "modern" not in words  # part of a cuisine and of a kind of attraction: tells neither
    assert "the" not in words  # a function word
    assert words["museum"] == "attraction type"


def test_chinese_values_are_found_longest_first_by_attribute():
    found = zh_values_in("这个酒店提供收费停车位和公共区域和部分房间提供wifi吗？还想吃京味爆肚")
    # not also 「部分房间提供wifi」 inside the second
    assert found["酒店设施"] == {"收费停车位", "公共区域和部分房间提供wifi"}
    assert found["推荐菜"] == {"京味爆肚"}
    assert zh_values_in("帮我查一下订单") == {}


def test_a_dish_the_catalogue_offers_is_a_dish_though_no_labelled_dialogue_asked_for_it():
    # 「糖醋里脊」 is on the venue database's menus; the fit half's labelled requests never named it
    assert zh_values_in("有没有做糖醋里脊的馆子？") == {"推荐菜": {"糖醋里脊"}}


def test_a_value_inside_a_name_or_another_word_is_not_said():
    assert zh_values_in("北京烤鸭(前门店)的评分怎么样？") == {}  # a restaurant's name, not a dish asked for
    assert zh_values_in("我家的电饭煲坏了") == {}  # 「饭煲」 is a dish, 「电饭煲」 a rice cooker
    assert zh_values_in("其他的都可以") == {}  # menu entries with no noun are words of the language


def test_sense_words_are_said_with_an_attributes_values_far_more_than_elsewhere():
    vocabulary = {"german": "food", "spanish": "food", "north": "area"}
    turns = [(f"I want {c} food at a restaurant please", frozenset({"food"})) for c in ("german", "spanish") * 3]
    turns += [(f"A hotel in the {a} please", frozenset({"area"})) for a in ("north",) * 5]
    turns += [("Please book it for me", frozenset())] * 20
    senses = senses_of(turns, vocabulary)
    assert senses["food"] == ["food", "restaurant"]  # "please" is said everywhere, "want" is a function word
    assert senses["area"] == ["hotel"]


def test_the_shipped_senses_tell_a_cuisine_by_food_and_a_station_by_the_train():
    assert {"food", "restaurant"} <= senses()["food"]
    assert "train" in senses()["place"]
    assert "learning" not in senses()["food"]


def test_a_question_asks_for_the_attribute_its_name_ends_in():
    assert asked_attributes("What kind of food did I want?", set()) == {"food"}
    assert asked_attributes("Which area was it in?", set()) == {"area"}
    assert asked_attributes("What price range did I say?", set()) == {"price range"}
    assert asked_attributes("我想吃的是哪道菜？", set()) == {"推荐菜"}
    assert asked_attributes("酒店提供什么设施？", set()) == {"酒店设施"}
    assert asked_attributes("这家的招牌菜是什么？", set()) == {"推荐菜"}
    assert asked_attributes("What time is my table for?", set()) == frozenset()
    assert asked_attributes("菜鸟驿站的包裹到了吗？", set()) == frozenset()  # a parcel locker, not a dish


def test_a_name_several_attributes_end_in_is_read_by_the_domain_the_question_names():
    assert asked_attributes("What type of place did I want to stay at?", {"hotel"}) == {"lodging type"}
    assert asked_attributes("What type of attraction was it?", {"attraction"}) == {"attraction type"}
    assert asked_attributes("What type was it?", set()) == {"lodging type", "attraction type"}
