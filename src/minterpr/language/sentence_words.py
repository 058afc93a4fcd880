"""The closed word lists the reader's small grammars run on (:mod:`minterpr.language.text_reading`).

Garment and body-part nouns, the words that negate, fill, reset or end a noun phrase, held objects,
and the words that bring another person into a sentence: lists of words, no grammar.
"""

from __future__ import annotations

# Nouns that only say which garment a colour belongs to; they assert no type.
PART_NOUNS = {
    "upper": (
        "top",
        "tops",
        "upper garment",
        "upper body",
        "shirt",
        "tee",
        "jacket",
        "coat",
        "sweater",
        "hoodie",
        "blouse",
        "blazer",
        "vest",
        "tank top",
        "jumper",
        "pullover",
        "windbreaker",
        "polo",
        "suit",
        "sleeves",
        "sleeve",
        "tunic",
        "jersey",
        "uniform",
        "cardigan",
        "hood",
    ),  # a hood is the top's: "a blue coat with a white hood"
    "lower": (
        "bottoms",
        "lower garment",
        "trousers",
        "pants",
        "jeans",
        "shorts",
        "skirt",
        "slacks",
        "leggings",
        "capri pants",
        "lower body",
        "lower clothes",
        "dress",
        "miniskirt",
        "maxi skirt",
        "hot pants",
        "skirts",
        "dresses",
    ),
    "feet": (
        "shoes",
        "shoe",
        "sneakers",
        "trainers",
        "boots",
        "sandals",
        "footwear",
        "heels",
        "flats",
        "tights",
        "stockings",
        "wedges",
        "slippers",
        "loafers",
        "sandles",
        "pumps",
    ),
    "head": ("hair", "haired", "haircut"),
    "both": ("outfit", "clothes", "clothing", "attire"),
}
COLOUR_SLOT = {"upper": "upper_colour", "lower": "lower_colour", "feet": "footwear_colour", "head": "hair_colour"}
SLOT_PART = {
    "upper_colour": "upper",
    "lower_colour": "lower",
    "footwear_colour": "feet",
    "hair_colour": "head",
    "upper_pattern": "upper",
    "lower_pattern": "lower",
}
# Ontology phrases too generic or too ambiguous to assert a value by themselves.
IGNORED = {
    "top",
    "upper garment",
    "shoes",
    "regular shoes",
    "long",
    "short",
    "young",
    "an object",
    "print",
    "plain",
    "adult",
    "old",
    "casual",
    "formal",
    "smart",
    "suit",
}
PRONOUNS = {("gender", "male"): ("he", "his", "him"), ("gender", "female"): ("she", "her", "hers")}
# Phrases read and dropped: they name nothing of the ontology, or would be misread word by word.
NOTHING = (
    "he or she",
    "she or he",
    "his or her",
    "her or his",
    "bathing suit",
    "swim suit",
    "jump suit",
    "body suit",
    "floral print",
    "flower print",
    "animal print",
    "leopard print",
    "wine glass",
    "no shoes",
    "no socks",
    "no shirt",
    "slip on",
    "slip ons",
    "ankle strap",
    "the picture",
    "this picture",
    "the photo",
    "the image",
)
GENDER_WORDS = {
    "man": "male",
    "guy": "male",
    "gentleman": "male",
    "male": "male",
    "boy": "male",
    "woman": "female",
    "lady": "female",
    "girl": "female",
    "female": "female",
    "gal": "female",
}
# Nouns a colour may describe that are not garments (the colour is then nobody's garment's).
NON_GARMENT = set(
    "belt bag bags backpack back hat cap umbrella object objects scarf purse handbag suitcase folder box phone cup bottle "
    "headphones glasses sunglasses watch necklace bracelet stripe logo design car bike bicycle cart collar trim laces lace "
    "soles sole frame frames rims rim straps strap zipper lining socks sock tie gloves glove wristband wristbands tag "
    "lanyard apron robe robes jumpsuit bodysuit costume veil bandana skin complexion face eyes head paper papers book sign "
    "wall floor building railing post door line lines background stroller laptop handles handle wire cord buttons "
    "pocket pockets patch patches dots spots flowers print lettering writing picture letters words characters tote glass "
    "man woman person guy lady girl boy male female people child kid individual pedestrian adult gentleman helmet".split()
)
PEOPLE = set(
    "man woman person people girl boy lady guy child kid baby toddler adult gentleman pedestrian individual friend "
    "companion son daughter mother father mom dad husband wife boyfriend girlfriend someone somebody men women "
    "children kids family couple group".split()
)
HELD = set(
    "phone cellphone smartphone bottle cup mug drink beverage food papers paper laptop box microphone book books "
    "newspaper something object objects tablet ipad bucket basket package parcel tray".split()
)
HOLDING = {
    "hold",
    "holds",
    "holding",
    "held",
    "carry",
    "carries",
    "carrying",
    "hand",
    "hands",
    "talking",
    "looking",
    "using",
}
NEGATORS = {"no", "not", "without", "never", "n't", "nothing", "neither", "nor", "rather", "instead"}
FILLERS = {
    "a",
    "an",
    "any",
    "the",
    "wearing",
    "carrying",
    "holding",
    "have",
    "has",
    "had",
    "having",
    "on",
    "his",
    "her",
    "their",
    "be",
    "is",
    "was",
    "wear",
    "carry",
    "hold",
    "than",
    "seem",
    "appear",
    "to",
    "there",
    "got",
    "of",
}
RESETS = {",", "and", "but", "though", "also", "with"}
HEAD_STOPS = {
    ",",
    "and",
    "or",
    "but",
    "with",
    "without",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "while",
    "at",
    "on",
    "in",
    "of",
    "over",
    "under",
    "around",
    "to",
    "near",
    "from",
    "than",
    "rather",
    "not",
    "no",
    "as",
    "that",
    "which",
    "who",
    "carrying",
    "wearing",
    "holding",
    "walking",
    "he",
    "she",
    "they",
    "his",
    "her",
    "their",
    ":",
    "/",
    "also",
    "across",
    "by",
    "the",
    "a",
    "an",
    "for",
    "should",
    "be",
    "though",
}
INTRODUCERS = (
    ("next", "to"),
    ("walking", "with"),
    ("with",),
    ("beside",),
    ("near",),
    ("behind",),
    ("alongside",),
    ("following",),
    ("accompanied", "by"),
    ("talking", "to"),
    ("talking", "with"),
    ("holding", "hands", "with"),
    ("embracing",),
    ("hugging",),
    ("kissing",),
    ("helping",),
    ("see",),
)
DETERMINERS = {"a", "an", "the", "another", "her", "his", "their", "two", "some", "other", "one"}
PRONOUN_GENDER = {"he": "male", "she": "female"}
GARMENT_PARTS = ("upper", "lower", "feet", "head", "both")
# After "and", these turn a phrase about another person back to the target.
BACK = {"is", "has", "wearing", "carrying", "holding", "wears", "carries", "holds", "he", "she", "his", "her"}
