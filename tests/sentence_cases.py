"""Hand-written paragraphs and the sentences the splitting rules find in them (nmt/data/sentences.py), for the
tests of the rules in Python and of the ONNX graph the Argos export writes."""

SPLITS = [  # language, paragraph, the sentences the splitter must find
    (
        "de",
        'Das kostet z. B. 3.5 Euro. Dr. Müller kam um 9 Uhr. Er fragte: "Wirklich?!" Dann ging er.',
        [
            "Das kostet z. B. 3.5 Euro.",
            "Dr. Müller kam um 9 Uhr.",
            'Er fragte: "Wirklich?!"',
            "Dann ging er.",
        ],
    ),
    (
        "de",
        "Hunde, Katzen usw. und Vögel. Katzen usw. Dann kam der Regen... und es hörte nicht auf. "
        "Am 3. Mai war es kalt.",
        [
            "Hunde, Katzen usw. und Vögel.",
            "Katzen usw.",
            "Dann kam der Regen... und es hörte nicht auf.",
            "Am 3. Mai war es kalt.",
        ],
    ),
    (
        "de",
        "J. R. R. Tolkien schrieb Bücher (viele!). „Ja!“ Er sah z.B. Hunde. Sie kosten 1.000 Euro! Warum?",
        [
            "J. R. R. Tolkien schrieb Bücher (viele!).",
            "„Ja!“",
            "Er sah z.B. Hunde.",
            "Sie kosten 1.000 Euro!",
            "Warum?",
        ],
    ),
    (
        "en",
        'Mr. Smith, e.g. a doctor, met Dr. Jones. They talked. It cost $3.50! Why?! "Because." Then I left.',
        [
            "Mr. Smith, e.g. a doctor, met Dr. Jones.",
            "They talked.",
            "It cost $3.50!",
            "Why?!",
            '"Because."',
            "Then I left.",
        ],
    ),
    (
        "fr",
        "M. Dupont est arrivé. Il a dit : « Bonjour ! » Puis il est parti, p. ex. à Paris. Fin.",
        ["M. Dupont est arrivé.", "Il a dit : « Bonjour ! »", "Puis il est parti, p. ex. à Paris.", "Fin."],
    ),
    # Known misses, asserted as they are: no space after the punctuation; a sentence that ends in a single
    # letter, or in German in a number of one or two digits
    (
        "de",
        "Sie sind gut.„Nein“, sagte sie. Er war 12. Dann nahm er Vitamin A. Es half.",
        ["Sie sind gut.„Nein“, sagte sie.", "Er war 12. Dann nahm er Vitamin A. Es half."],
    ),
    ("xx", "Ka lo mi. Su te ra? Be zu! Dr. No.", ["Ka lo mi.", "Su te ra?", "Be zu!", "Dr.", "No."]),
]
