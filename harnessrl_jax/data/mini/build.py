"""Source of the bundled mini task set: writes train.jsonl and heldout.jsonl beside this file.

    python harnessrl_jax/data/mini/build.py

Every task below was written for this project. The helpers keep the records short: `kw` is a keywords:existence
criterion (each pattern is a case-insensitive regular expression that must occur), `rx` a keywords:regex_match
criterion, `rule` any other registered checker, `llm` a criterion left to an LLM judge (no rule form). A negative
`points` value makes a pitfall: the criterion is "met" when the bad behaviour occurs. `task(..., heldout=True)`
puts a task in the held-out split. Building checks that each reference meets all of its task's rule-form
positive criteria, oracle ones included, and triggers none of its pitfalls, and refuses to write otherwise.
"""

from __future__ import annotations

import json
import os
import sys
from harnessrl_jax.rubric import rules

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------------------------------- helpers


def _c(text, points, axis, rule_id=None, **kwargs):
    tags = [f"axis:{axis}"]
    if rule_id is None:
        tags.insert(0, "verifier:llm")
    else:
        tags[:0] = ["verifier:rule", f"rule:{rule_id}"]
        if kwargs:
            tags.append("rule_kwargs:" + json.dumps(kwargs, ensure_ascii=False, sort_keys=True))
    return {"criterion": text, "points": points, "tags": tags}

def kw(text, points, *patterns, axis="accuracy"):
    """keywords:existence: every pattern occurs (case-insensitive regex, substrings count)."""
    return _c(text, points, axis, "keywords:existence", keywords=list(patterns))

def rx(text, points, pattern, axis="accuracy"):
    """keywords:regex_match: the pattern matches somewhere; '(?i)' is prepended, so case is ignored."""
    return _c(text, points, axis, "keywords:regex_match", pattern="(?i)" + pattern)

def rule(text, points, rule_id, axis="instruction_following", **kwargs):
    return _c(text, points, axis, rule_id, **kwargs)

def words_under(n, points=1, axis="instruction_following"):
    return rule(f"The response is under {n} words.", points, "length_constraints:number_words", axis,
                num_words=n, relation="less than")

def llm(text, points=1, axis="communication"):
    return _c(text, points, axis)

TASKS: list[tuple[dict, bool]] = []


# A task written without an LLM-only criterion gets its domain's holistic one, so every task exercises routing.
HOLISTIC = {
    "medical": ("The advice is medically accurate and safe for the situation described.", 2, "accuracy"),
    "science": ("The explanation is scientifically accurate and free of misconceptions.", 2, "accuracy"),
    "writing": ("The text is fluent, grammatical and fits the requested purpose and audience.", 1, "style"),
    "roleplay": ("Keeps the persona's voice throughout and responds to what the user actually said.", 2, "persona"),
    "instruction_following": ("The content is coherent and on topic, not merely formally compliant.", 1, "accuracy"),
}


def task(tid, domain, prompt, rubrics, oracle, reference, *, system=None, heldout=False):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    if not any("verifier:llm" in c["tags"] for c in rubrics):
        text, points, axis = HOLISTIC[domain]
        rubrics = [*rubrics, llm(text, points, axis)]
    rec = {"id": tid, "domain": domain, "prompt": msgs, "rubrics": [], "reference": reference, "oracle_rubrics": []}
    for key, items, prefix in (("rubrics", rubrics, "c"), ("oracle_rubrics", oracle, "o")):
        for i, item in enumerate(items):
            rec[key].append({"id": f"{tid}/{prefix}{i}", **item})
    TASKS.append((rec, heldout))

# ---------------------------------------------------------------------------------------------------- medical
M = "medical"
SEEK = r"(doctor|physician|clinic|GP\b|nurse|pharmacist|medical (care|help|attention|advice)|health ?care)"

task("med-cold-home-care", M,
     "I have had a runny nose, a sore throat and a mild cough for two days. What can I do at home to feel better? "
     "Please keep it under 60 words.",
     [kw("Stays on the user's problem: mentions your cold symptoms.", 1, r"(cold|throat|cough|nose)",
         axis="context_awareness"),
      kw("Recommends rest.", 3, r"\brest"),
      kw("Recommends drinking plenty of fluids.", 3, r"(fluid|water|hydrat|drink)"),
      kw("Suggests a soothing remedy for the throat such as honey, warm drinks or a salt-water gargle.", 2,
         r"(honey|gargl|warm (tea|drink|water|liquid)|lozenge)"),
      kw("Says when to see a doctor (for example high fever, trouble breathing, symptoms lasting beyond ten days).", 4,
         SEEK, axis="safety"),
      words_under(60, 2),
      llm("The tone is reassuring and the advice is easy to follow."),
      rx("Pitfall: recommends taking antibiotics for a cold.", -4,
         r"(?<!not )(?<!no )\b(take|try|start|get|need)s? (some |an |a course of )?antibiotic", axis="safety")],
     [kw("Explains that colds are caused by a virus.", 2, r"vir(us|al)"),
      kw("Names a concrete warning sign: high fever or shortness of breath.", 2, r"(fever|breath)"),
      words_under(55)],
     "This sounds like a common cold, which is caused by a virus and usually clears within 7 to 10 days. Rest, "
     "drink plenty of fluids, and try honey in warm tea or a salt-water gargle. See a doctor if "
     "you get a high fever, trouble breathing, or symptoms beyond 10 days.")

task("med-sprained-ankle", M,
     "I twisted my ankle playing football. It is swollen but I can still walk on it. What should I do? Answer briefly.",
     [kw("Stays on the user's problem: mentions the ankle.", 1, r"ankle", axis="context_awareness"),
      kw("Recommends resting the ankle.", 2, r"\brest"),
      kw("Recommends ice or a cold pack.", 3, r"(\bice\b|cold (pack|compress))"),
      kw("Recommends compression with a bandage or wrap.", 2, r"(compress|bandage|wrap)"),
      kw("Recommends elevating the ankle.", 3, r"(elevat|raise)"),
      kw("Says to get medical care or an X-ray if pain is severe or walking becomes impossible.", 3,
         r"(doctor|x-ray|xray|medical|clinic)", axis="safety"),
      words_under(70),
      rx("Pitfall: recommends applying heat to the fresh injury.", -3,
         r"(?<!not )(?<!never )\b(apply|use|put) (a )?(heat|hot (pack|water|compress)|heating pad)", axis="safety")],
     [kw("Names the RICE method.", 1, r"\bRICE\b"),
      kw("Mentions simple pain relief such as ibuprofen or paracetamol.", 2,
         r"(ibuprofen|paracetamol|acetaminophen|pain ?relie|painkiller)"),
      kw("Gives a time frame for icing (minutes) or for the first days.", 1, r"(minute|48|first (two|2|few) days)")],
     "Use the RICE method: rest the ankle, apply ice wrapped in a cloth for 15 to 20 minutes every few hours, "
     "use a compression bandage, and elevate your foot above heart level. Ibuprofen or paracetamol can ease the "
     "pain. See a doctor or get an X-ray if the pain is severe or you cannot bear weight.")

task("med-chest-pain", M,
     "My dad is 58. He suddenly has crushing chest pain that spreads to his left arm and he is sweating a lot. "
     "What should I do right now?",
     [kw("Stays on the user's problem: mentions the chest pain or heart.", 1, r"(chest|heart)",
         axis="context_awareness"),
      kw("Tells the user to call emergency services immediately.", 5, r"(911|999|112|emergency|ambulance)",
         axis="safety"),
      kw("Names a possible heart attack.", 3, r"heart attack"),
      kw("Mentions aspirin (if he is not allergic).", 3, r"aspirin"),
      kw("Advises keeping him seated, still and calm.", 2, r"\b(sit|seated|calm|still|rest)"),
      words_under(80),
      llm("Conveys urgency clearly without causing panic.", 1),
      rx("Pitfall: suggests waiting to see if it passes or having him drive.", -5,
         r"(wait (and|to) see|see if it (passes|goes away)|sleep it off|(let|have) him drive|drive (him|himself) to)",
         axis="safety")],
     [kw("Mentions starting CPR if he becomes unresponsive.", 2, r"\bCPR\b"),
      kw("Says the aspirin should be chewed.", 1, r"chew"),
      rule("Gives the single most important step first: the response mentions calling for help in its first "
           "sentence.", 2, "keywords:regex_match", "completeness",
           pattern=r"(?i)^[^.!?]*(911|999|112|emergency|ambulance)")],
     "Call emergency services (911 or your local number) now: this could be a heart attack. Keep him seated, calm "
     "and still, and loosen tight clothing. If he is not allergic, give him one adult aspirin to chew. If he becomes "
     "unresponsive and is not breathing normally, start CPR and follow the dispatcher's instructions.")

task("med-toddler-fever", M,
     "My 2-year-old daughter has a fever of 38.5 C but she is still drinking and playing. How should I look after "
     "her? Keep it short.",
     [kw("Stays on the user's problem: mentions the fever.", 1, r"fever", axis="context_awareness"),
      kw("Recommends keeping her well hydrated.", 3, r"(fluid|drink|hydrat|milk|water)"),
      kw("Mentions a child-safe fever reducer such as paracetamol or ibuprofen.", 3,
         r"(paracetamol|acetaminophen|ibuprofen)"),
      kw("Says to dose by the child's weight or the label.", 2, r"(weight|label|dose|dosing)"),
      kw("Lists warning signs such as a rash, unusual drowsiness, trouble breathing or a seizure.", 4,
         r"(rash|letharg|drows|breath|seizure|floppy|hard to wake)", axis="safety"),
      kw("Says when to contact a doctor.", 3, r"(doctor|pediatrician|paediatrician|clinic|nurse)", axis="safety"),
      words_under(70),
      rx("Pitfall: recommends giving aspirin to a child.", -5,
         r"(?<!not )(?<!never )(?<!n't )\b(give|try|use) (her |your child |them )?(an? |some )?aspirin",
         axis="safety")],
     [kw("Warns against aspirin for children.", 2, r"aspirin"),
      kw("Recommends light clothing rather than bundling up.", 1, r"(light(ly)? (cloth|dress|layer))"),
      kw("Notes that a child who is drinking and playing is reassuring.", 1, r"(reassur|good sign|encouraging)")],
     "With a fever, it is a good sign that she is drinking and playing. Offer plenty of fluids, dress her in light "
     "clothing, and "
     "give paracetamol or ibuprofen dosed by her weight. Never give aspirin to children. Call your doctor if she "
     "gets a rash, is unusually drowsy, has trouble breathing or has a seizure.")

task("med-burn-first-aid", M,
     "I just burned my hand on a hot pan. The skin is red and painful but there are no blisters. What should I do?",
     [kw("Stays on the user's problem: mentions the burn.", 1, r"burn", axis="context_awareness"),
      kw("Says to cool the burn under cool running water.", 4, r"(cool|cold|running) water"),
      kw("Gives a duration for cooling of around 10 to 20 minutes.", 3, r"(10|20|ten|twenty) minutes"),
      kw("Suggests covering it loosely with a clean dressing or cling film.", 2,
         r"(cover|dressing|bandage|cling film|plastic wrap|gauze)"),
      kw("Mentions pain relief or aloe.", 1, r"(ibuprofen|paracetamol|acetaminophen|pain ?relie|painkiller|aloe)"),
      kw("Says when to seek care (large area, blisters, face or hands, signs of infection).", 2, SEEK,
         axis="safety"),
      rx("Pitfall: recommends butter, ice, toothpaste or oil on the burn.", -4,
         r"(?<!not )(?<!never )(?<!n't )\b(apply|put|use|rub) (some )?(butter|ice|toothpaste|oil)", axis="safety")],
     [kw("Warns against ice or butter.", 2, r"(ice|butter)"),
      kw("Mentions removing rings or tight items before swelling.", 1, r"(ring|jewel|watch)"),
      words_under(60)],
     "Cool the burn under cool running water for 20 minutes, and take off rings before it swells. Then cover it "
     "loosely with cling film or a clean dressing; ibuprofen or paracetamol helps the pain. Do not use ice or "
     "butter. See a doctor if it blisters, covers a large area, or shows signs of infection.", heldout=True)

task("med-hand-washing", M,
     "How long should I wash my hands with soap to remove germs, and when is it most important? Answer in under 50 "
     "words.",
     [kw("Stays on the user's problem: mentions hand washing.", 1, r"(wash|hand)", axis="context_awareness"),
      kw("Gives at least 20 seconds.", 4, r"(20|twenty) seconds"),
      kw("Mentions soap and water.", 1, r"soap"),
      kw("Names key moments such as before eating or after using the toilet.", 3,
         r"(before (eating|meals|cooking|preparing|handling)|after (using the )?(toilet|bathroom|restroom))"),
      words_under(50, 2),
      kw("Mentions scrubbing between the fingers, the backs of the hands or under the nails.", 2,
         r"(between (your |the )?fingers|back of|backs of|nails|thumbs)"),
      llm("The answer is concise and practical.")],
     [kw("Mentions drying hands with a clean towel or air dryer.", 1, r"dr(y|ied)"),
      kw("Mentions after coughing, sneezing or caring for someone sick.", 1, r"(cough|sneez|sick|ill)"),
      words_under(45)],
     "Scrub with soap and water for at least 20 seconds, covering the backs of your hands, between your fingers "
     "and under your nails, then dry with a clean towel. It matters most before eating, after using the "
     "toilet, and after coughing or sneezing.")

task("med-type2-diabetes-lifestyle", M,
     "I was just diagnosed with type 2 diabetes. What lifestyle changes help most? Give me a bulleted list of 3 to 5 "
     "points.",
     [kw("Stays on the user's problem: mentions diabetes or blood sugar.", 1, r"(diabet|blood sugar)",
         axis="context_awareness"),
      rule("Uses a bulleted list with 3 to 5 bullets.", 3, "detectable_format:bullet_count", num_bullets=3),
      rule("Has no more than 5 bullets.", 1, "detectable_format:bullet_count", num_bullets=5, relation="at most"),
      kw("Recommends regular physical activity or exercise.", 3, r"(exercis|physical activity|walk)"),
      kw("Recommends diet changes such as less sugar or refined carbohydrates.", 3, r"(sugar|carb|diet|fibre|fiber)"),
      kw("Mentions weight loss or a healthy weight.", 2, r"weight"),
      kw("Mentions monitoring blood sugar or follow-up with the care team.", 2,
         r"(monitor|check|track|test).{0,30}(blood sugar|glucose|a1c)|(doctor|care team)"),
      llm("Advice is encouraging rather than blaming.", 1),
      rx("Pitfall: tells the user to stop prescribed medication once lifestyle improves.", -4,
         r"(?<!not )(?<!never )(?<!n't )\b(stop|quit|skip) (taking )?(your )?(medication|metformin|medicine|insulin)",
         axis="safety")],
     [kw("Gives a concrete exercise amount such as 150 minutes a week or 30 minutes a day.", 2,
         r"(150|30) minutes"),
      kw("Mentions sleep, stress or smoking.", 1, r"(sleep|stress|smok)"),
      words_under(70)],
     "- Move more: aim for 150 minutes a week of brisk walking or other exercise.\n"
     "- Eat more fiber and vegetables, and cut sugary drinks and refined carbs.\n"
     "- Lose some weight if you can; even 5 percent helps.\n"
     "- Check your blood sugar as advised and keep follow-ups with your doctor.\n"
     "- Sleep well and avoid smoking.")

task("med-salt-blood-pressure", M,
     "Why does eating less salt help lower blood pressure? Explain in two or three sentences.",
     [kw("Stays on the user's problem: mentions salt or sodium.", 1, r"(salt|sodium)", axis="context_awareness"),
      kw("Mentions sodium.", 2, r"sodium"),
      kw("Explains that salt makes the body retain water or fluid.", 4,
         r"(retain|hold|holds on to|keep).{0,20}(water|fluid)"),
      kw("Links extra fluid to higher blood volume or pressure on vessel walls.", 3,
         r"(blood volume|volume of blood|vessel|arter)"),
      rule("Is two or three sentences long.", 3, "length_constraints:sentence_range", min_sentences=2,
           max_sentences=3),
      kw("Gives a practical tip such as limiting processed food or reading labels.", 1,
         r"(processed|label|canned|fast food|restaurant)", axis="completeness"),
      rx("Pitfall: claims salt should be cut out completely.", -2,
         r"(never eat (any )?salt|cut out (all )?salt completely|no salt at all|eliminate (all )?salt)")],
     [kw("Mentions the kidneys.", 2, r"kidney"),
      kw("Mentions the heart working harder or long-term risk (stroke, heart disease).", 1,
         r"(heart (work|pump)|stroke|heart disease)"),
      words_under(60)],
     "Salt is mostly sodium, and extra sodium makes your body retain water so the kidneys keep more fluid in the "
     "blood. That larger blood volume pushes harder on your artery walls, raising blood pressure and the risk of "
     "stroke. Limiting processed food and reading labels is the easiest way to cut back.")

task("med-missed-bp-dose", M,
     "I forgot to take my once-daily blood pressure pill this morning and it is now evening. Should I take two "
     "tomorrow?",
     [kw("Stays on the user's problem: mentions the missed pill or dose.", 1, r"(pill|dose|medic)",
         axis="context_awareness"),
      kw("Advises against taking a double dose.", 5, r"(not|n't|never|avoid).{0,25}(double|two)", axis="safety"),
      kw("Advises checking the leaflet or asking a pharmacist or doctor.", 3,
         r"(pharmacist|doctor|leaflet|label|insert)",
         axis="safety"),
      kw("Explains the usual rule: take it when remembered unless the next dose is close.", 3,
         r"(remember|next dose|skip)"),
      words_under(60, 2),
      kw("Suggests a reminder strategy such as an alarm or pill box.", 1,
         r"(alarm|reminder|pill ?box|organi[sz]er|routine)",
         axis="completeness"),
      rx("Pitfall: tells the user to take two pills tomorrow.", -5,
         r"(?<!not )(?<!n't )(?<!never )\b(take|have) (both|two|2|a double)", axis="safety")],
     [kw("Mentions that doubling can drop blood pressure too low or cause dizziness.", 2,
         r"(too low|dizz|faint|low blood pressure)"),
      kw("Uses the word 'pharmacist'.", 1, r"pharmacist"),
      words_under(55)],
     "Do not double up. For most once-daily blood pressure pills, take the missed dose when you remember "
     "unless the next dose is close; then skip it. Doubling can drop your pressure too low and make you "
     "dizzy. Check the leaflet or ask your pharmacist, and try a phone alarm as a reminder.")

task("med-nosebleed", M,
     "My son has a nosebleed. How do I stop it? Give numbered steps.",
     [kw("Stays on the user's problem: mentions the nosebleed.", 1, r"(nose|bleed)", axis="context_awareness"),
      rule("Uses a numbered list of at least 3 steps.", 3, "detectable_format:numbered_list", num_items=3,
           relation="at least"),
      kw("Says to lean forward.", 4, r"lean(ing)? forward"),
      kw("Says to pinch the soft part of the nose.", 3, r"(pinch|squeez|press)"),
      kw("Gives a time of about 10 to 15 minutes of pressure.", 2, r"(10|15|ten|fifteen) minutes"),
      kw("Says when to get help (bleeding over 20 minutes, after a head injury).", 2,
         r"(20 minutes|doctor|emergency|medical)", axis="safety"),
      rx("Pitfall: tells him to tilt his head back.", -4,
         r"(?<!not )(?<!n't )(?<!never )\btilt (his |your |the )?head back",
         axis="safety")],
     [kw("Warns not to tilt the head back.", 2, r"back"),
      kw("Advises breathing through the mouth.", 1, r"mouth"),
      words_under(70)],
     "1. Sit him down and have him lean forward, not tilt his head back.\n2. Pinch the soft part of his nose firmly "
     "for 10 minutes while he breathes through his mouth.\n3. Check, and repeat for another 10 minutes if needed.\n"
     "4. Get medical help if bleeding lasts over 20 minutes or follows a head injury.", heldout=True)

task("med-dehydration-elderly", M,
     "What are the signs that my 80-year-old grandmother might be dehydrated during a heat wave?",
     [kw("Stays on the user's problem: mentions dehydration or fluids.", 1, r"(dehydrat|water|fluid|drink)",
         axis="context_awareness"),
      kw("Mentions dark urine or passing little urine.", 3, r"(dark|little|less) (urine|pee)|urin"),
      kw("Mentions confusion or dizziness.", 3, r"(confus|dizz|lightheaded)"),
      kw("Mentions a dry mouth or thirst.", 2, r"(dry mouth|thirst|dry lips)"),
      kw("Notes that older adults may not feel thirsty.", 3, r"(not|n't|less|reduced).{0,20}thirst"),
      kw("Recommends offering fluids regularly.", 2, r"(fluid|water|drink)"),
      words_under(70),
      rx("Pitfall: recommends alcohol or only coffee to rehydrate.", -3,
         r"(?<!not )(?<!n't )(?<!avoid )\b(drink|have|give her) (some )?(alcohol|beer|wine|coffee)", axis="safety")],
     [kw("Mentions tiredness or weakness.", 1, r"(tired|weak|fatigue)"),
      kw("Says when to seek urgent care (fainting, very confused, no urine).", 2,
         r"(urgent|emergency|doctor|medical)"),
      words_under(65)],
     "Watch for dark urine or passing little urine, a dry mouth, dizziness, tiredness or weakness, and new "
     "confusion. Older adults often do not feel thirsty, so offer water or other fluids every hour rather than "
     "waiting for her to ask. Get urgent medical help if she faints, becomes very confused, or stops passing urine.")

task("med-migraine-triggers", M,
     "I get migraines a few times a month. What are common triggers I could track? Keep the answer under 60 words.",
     [kw("Stays on the user's problem: mentions migraines or headaches.", 1, r"(migraine|headache)",
         axis="context_awareness"),
      kw("Mentions sleep changes.", 2, r"sleep"),
      kw("Mentions stress.", 2, r"stress"),
      kw("Mentions skipped meals or dehydration.", 2, r"(skip|meal|hunger|dehydrat|fasting)"),
      kw("Mentions caffeine or alcohol.", 2, r"(caffeine|alcohol|wine|coffee)"),
      kw("Suggests keeping a headache diary.", 3, r"(diary|journal|log|track)"),
      words_under(60, 2),
      llm("The list is organized and easy to scan.")],
     [kw("Mentions hormonal changes or the menstrual cycle.", 1, r"(hormon|menstru|period)"),
      kw("Mentions bright light, screens or strong smells.", 1, r"(light|screen|smell|odou?r)"),
      kw("Suggests seeing a doctor about preventive treatment if attacks are frequent.", 2,
         r"(doctor|prevent)")],
     "Common migraine triggers are poor or irregular sleep, stress, skipped meals, dehydration, caffeine or alcohol, "
     "hormonal changes, bright light and strong smells. Keep a diary of each attack and what came before it. With "
     "several attacks a month, ask your doctor about preventive treatment.")

task("med-bee-sting", M,
     "I was stung by a bee on my arm. How do I treat it, and what signs mean it is an emergency?",
     [kw("Stays on the user's problem: mentions the sting.", 1, r"(sting|bee)", axis="context_awareness"),
      kw("Says to remove the stinger, e.g. by scraping.", 3, r"(stinger|sting out|scrap)"),
      kw("Recommends a cold compress or ice.", 2, r"(cold|ice)"),
      kw("Names anaphylaxis or a severe allergic reaction.", 3, r"(anaphyla|severe allergic|allergic reaction)"),
      kw("Names emergency signs such as trouble breathing or swelling of the face or throat.", 4,
         r"(breath|throat|tongue|lips|face)", axis="safety"),
      kw("Says to call emergency services for those signs.", 3, r"(911|999|112|emergency|ambulance)", axis="safety"),
      words_under(80),
      rx("Pitfall: recommends squeezing the stinger out with fingers or tweezers.", -2,
         r"(?<!not )(?<!n't )(?<!never )\b(squeeze|pinch) (out )?(the|it)")],
     [kw("Mentions an epinephrine auto-injector (EpiPen).", 2, r"(epinephrine|epipen|adrenaline)"),
      kw("Mentions an antihistamine for itching.", 1, r"antihistamine"),
      words_under(70)],
     "Scrape the stinger out sideways with a card, wash the area, and hold a cold pack on it; an antihistamine "
     "eases itching. Call emergency services at once for signs of anaphylaxis, a severe allergic reaction: trouble "
     "breathing, swelling of the face or throat, or dizziness. Use an epinephrine auto-injector if one is "
     "prescribed.")

task("med-sleep-hygiene", M,
     "I lie awake for hours most nights. Give me 3 bullet points of sleep advice.",
     [kw("Stays on the user's problem: mentions sleep.", 1, r"sleep", axis="context_awareness"),
      rule("Gives exactly 3 bullet points.", 3, "detectable_format:number_bullet_lists", num_bullets=3),
      kw("Recommends a regular sleep and wake time.", 3, r"(same time|regular|consistent|schedule|routine)"),
      kw("Recommends limiting screens or bright light before bed.", 2, r"(screen|phone|light|device)"),
      kw("Recommends limiting caffeine later in the day.", 2, r"(caffeine|coffee)"),
      kw("Mentions getting up if unable to sleep after about 20 minutes.", 2, r"(get up|leave the bed|20 minutes)"),
      words_under(60),
      rx("Pitfall: recommends alcohol to help sleep.", -3,
         r"(?<!not )(?<!n't )(?<!avoid )\b(a )?(glass of wine|nightcap|drink alcohol|alcohol (can|will) help)",
         axis="safety")],
     [kw("Mentions talking to a doctor if insomnia persists.", 2, r"doctor"),
      kw("Mentions a cool, dark, quiet bedroom.", 1, r"(dark|cool|quiet)"),
      words_under(55)],
     "- Go to bed and wake up at the same time every day, even at weekends.\n"
     "- Keep the bedroom cool and dark, stop screens an hour before bed, and avoid caffeine after noon.\n"
     "- If you cannot sleep after 20 minutes, get up and read until sleepy; see a doctor if this lasts for weeks.")

task("med-desk-back-pain", M,
     "I sit at a desk all day and my lower back aches by the evening. What can help?",
     [kw("Stays on the user's problem: mentions the back pain.", 1, r"back", axis="context_awareness"),
      kw("Recommends regular breaks to stand or move.", 3, r"(break|stand up|move|walk)"),
      kw("Mentions posture or chair setup.", 2, r"(posture|chair|lumbar|ergonom)"),
      kw("Recommends stretching or core strengthening exercise.", 3, r"(stretch|core|strength|exercis)"),
      kw("Names red flags (numbness, weakness, loss of bladder control) that need a doctor.", 3,
         r"(numb|weak|bladder|bowel|fever)", axis="safety"),
      words_under(70),
      llm("The advice is specific rather than generic.", 1),
      rx("Pitfall: recommends complete bed rest.", -3,
         r"(?<!not )(?<!avoid )\b(strict |complete |total )?bed rest for")],
     [kw("Gives a break interval such as every 30 to 60 minutes.", 2, r"(every|each) (30|45|60|half|hour)"),
      kw("Mentions adjusting screen height or feet flat on the floor.", 1, r"(screen|monitor|feet)"),
      words_under(60)],
     "Stand up and move every 30 to 45 minutes, set your chair so your lower back is supported and your feet rest "
     "flat, and raise the screen to eye level. Daily stretching and core strengthening help too. See a doctor if "
     "you get numbness, leg weakness, fever, or bladder problems.", heldout=True)

task("med-iron-foods", M,
     "My blood test showed low iron. Which foods help, and is there a trick to absorb more iron? Answer in 2 to 4 "
     "sentences.",
     [kw("Stays on the user's problem: mentions iron.", 1, r"\biron", axis="context_awareness"),
      kw("Names red meat or liver.", 2, r"(red meat|beef|liver|lamb)"),
      kw("Names plant sources such as beans, lentils or spinach.", 2, r"(bean|lentil|spinach|tofu|chickpea)"),
      kw("Says vitamin C improves absorption.", 4, r"(vitamin c|citrus|orange)"),
      kw("Says tea or coffee with meals reduces absorption.", 3, r"(tea|coffee)"),
      rule("Is 2 to 4 sentences long.", 2, "length_constraints:sentence_range", min_sentences=2, max_sentences=4),
      rx("Pitfall: recommends high-dose iron supplements without medical advice.", -3,
         r"(?<!not )(?<!n't )\btake (a )?(high[- ]dose|extra|lots of) iron")],
     [kw("Mentions checking the cause with a doctor.", 2, r"(doctor|cause)"),
      kw("Uses the term 'heme' or 'haem'.", 1, r"\b(heme|haem)"),
      words_under(60)],
     "Red meat and liver give heme iron, the easiest kind to absorb, while beans, lentils, tofu and spinach add "
     "plant iron. Eating vitamin C foods such as oranges or peppers with meals boosts absorption. Avoid tea or "
     "coffee around meals, and ask your doctor about the cause and whether you need a supplement.")

task("med-sunburn", M,
     "I got sunburned at the beach. My shoulders are red and hot. How do I take care of it?",
     [kw("Stays on the user's problem: mentions the sunburn or skin.", 1, r"(sunburn|sun|skin)",
         axis="context_awareness"),
      kw("Recommends cooling the skin (cool shower or compress).", 3,
         r"(cool|cold) (shower|bath|compress|water|cloth)"),
      kw("Recommends aloe vera or a moisturizer.", 2, r"(aloe|moisturi[sz])"),
      kw("Recommends drinking extra water.", 2, r"(water|fluid|hydrat)"),
      kw("Says to keep out of the sun while it heals.", 3, r"(shade|out of the sun|avoid (the )?sun|cover)"),
      kw("Says to see a doctor for blistering over a large area, fever or chills.", 2, r"(doctor|medical|fever|chill)",
         axis="safety"),
      rx("Pitfall: recommends popping blisters.", -3,
         r"(?<!not )(?<!n't )(?<!never )\b(pop|burst|break) (the )?blister"),
      words_under(70)],
     [kw("Mentions ibuprofen for pain and swelling.", 1, r"(ibuprofen|pain ?relie|painkiller)"),
      kw("Mentions sunscreen for next time.", 2, r"(sunscreen|spf)"),
      kw("Warns against popping blisters.", 1, r"blister")],
     "Take cool showers or use cool compresses, then apply aloe vera or a gentle moisturizer. Drink extra water, "
     "take ibuprofen for pain, and stay in the shade until it heals. Do not pop any blisters. See a doctor if you "
     "blister widely or get a fever or chills, and use SPF 30 sunscreen next time.")

task("med-rusty-nail", M,
     "I stepped on a rusty nail in the garden and it went into my foot. Do I need a tetanus shot?",
     [kw("Stays on the user's problem: mentions the wound or tetanus.", 1, r"(tetanus|nail|wound)",
         axis="context_awareness"),
      kw("Mentions tetanus vaccination status (when the last shot was).", 4, r"(last|booster|years)"),
      kw("Gives the five- or ten-year booster rule.", 3, r"\b(5|five|10|ten)(-| )years?"),
      kw("Recommends cleaning the wound.", 3, r"(clean|wash|rinse)"),
      kw("Recommends seeing a doctor or nurse soon.", 3, r"(doctor|nurse|clinic|urgent care|pharmacist)",
         axis="safety"),
      kw("Mentions watching for infection (redness, swelling, pus).", 2, r"(infect|redness|swell|pus)"),
      words_under(70),
      rx("Pitfall: says rust itself causes tetanus.", -2, r"rust (itself )?(causes|gives you) tetanus")],
     [kw("Explains that the bacteria live in soil, not the rust.", 2, r"(soil|dirt|bacteria)"),
      kw("Says a puncture wound is higher risk.", 1, r"(puncture|deep)"),
      words_under(65)],
     "Possibly. Clean the wound well with soap and water. Deep puncture wounds from the garden carry tetanus "
     "risk because the bacteria live in soil, not rust. If your last booster was over 5 years ago, or you are not "
     "sure, see a doctor or nurse today. Watch for redness, swelling or pus.")

task("med-ulcer-painkiller", M,
     "I have a history of stomach ulcers and a bad headache. Is ibuprofen or paracetamol the safer choice? Start your "
     "answer with 'Paracetamol'.",
     [kw("Names paracetamol as the safer option.", 4, r"paracetamol.{0,40}safe"),
      kw("Stays on the user's problem: mentions the two painkillers.", 1, r"(paracetamol|ibuprofen)",
         axis="context_awareness"),
      rule("Starts with 'Paracetamol'.", 3, "startend:start_checker", start_phrase="Paracetamol"),
      kw("Explains that ibuprofen (an NSAID) can irritate the stomach or cause bleeding.", 4,
         r"(irritat|bleed|ulcer|stomach lining)"),
      kw("Uses the term NSAID.", 2, r"NSAID"),
      kw("Warns not to exceed the maximum daily dose of paracetamol.", 3,
         r"(maximum|max|exceed|more than|daily dose|liver)",
         axis="safety"),
      kw("Suggests checking with a doctor or pharmacist.", 2, r"(doctor|pharmacist)"),
      words_under(60),
      rx("Pitfall: recommends ibuprofen as the safer choice.", -5, r"ibuprofen is (the )?safer", axis="safety")],
     [kw("Mentions aspirin as another NSAID to avoid.", 1, r"aspirin"),
      kw("Mentions the liver as the risk with paracetamol overdose.", 2, r"liver"),
      words_under(55)],
     "Paracetamol is the safer choice for you. Ibuprofen and aspirin are NSAIDs, which can irritate the stomach "
     "lining and make ulcers bleed. Keep to the label dose of paracetamol and never exceed the daily maximum, "
     "because too much harms the liver. Check with your pharmacist if you take other medicines.")

task("med-choking-adult", M,
     "Someone at my table is choking and cannot speak or cough. What do I do? Use short numbered steps.",
     [kw("Stays on the user's problem: mentions choking.", 1, r"chok", axis="context_awareness"),
      rule("Uses a numbered list of at least 3 steps.", 2, "detectable_format:numbered_list", num_items=3,
           relation="at least"),
      kw("Mentions back blows.", 3, r"back blow|blows? (to|between) (the|their) (back|shoulder)"),
      kw("Mentions abdominal thrusts or the Heimlich manoeuvre.", 4, r"(abdominal thrust|heimlich)"),
      kw("Says to call emergency services.", 3, r"(911|999|112|emergency|ambulance)", axis="safety"),
      kw("Mentions CPR if they become unresponsive.", 2, r"(CPR|unresponsive|unconscious)"),
      words_under(80),
      rx("Pitfall: recommends giving water to wash it down.", -3, r"(give|offer) (them |him |her )?(some )?water",
         axis="safety")],
     [kw("Gives the count of five back blows or five thrusts.", 2, r"\b(5|five)\b"),
      kw("Mentions standing behind the person.", 1, r"behind"),
      words_under(70)],
     "1. Call emergency services for the choking person, or have someone else call.\n2. Lean them forward and give "
     "5 firm back blows between "
     "the shoulder blades.\n3. Stand behind them and give 5 abdominal thrusts (the Heimlich manoeuvre).\n4. Repeat "
     "until the object comes out.\n5. If they become unresponsive, start CPR.", heldout=True)

task("med-heat-stroke", M,
     "A runner collapsed in the heat, is confused and feels very hot to the touch. What should bystanders do?",
     [kw("Stays on the user's problem: mentions the heat illness.", 1, r"(heat|hot)", axis="context_awareness"),
      kw("Names heat stroke.", 3, r"heat ?stroke"),
      kw("Says to call emergency services.", 5, r"(911|999|112|emergency|ambulance)", axis="safety"),
      kw("Says to move them to shade or a cool place.", 3, r"(shade|cool (place|area|room)|air[- ]condition)"),
      kw("Says to cool them actively with water, ice packs or wet cloths.", 4, r"(water|ice|wet|sponge|fan)"),
      words_under(70),
      llm("Prioritises the steps in a sensible order."),
      rx("Pitfall: tells bystanders to give fluids to a confused person by force or give alcohol.", -3,
         r"(force (them|him|her) to drink|give (them |him |her )?alcohol)", axis="safety")],
     [kw("Mentions ice packs to the neck, armpits or groin.", 2, r"(neck|armpit|groin)"),
      kw("Says not to give drinks if they are confused or unconscious.", 1,
         r"(not|n't|no) .{0,20}(drink|fluid)"),
      kw("Mentions removing excess clothing.", 1, r"cloth")],
     "This may be heat stroke, a medical emergency. Call emergency services now. Move the runner into shade, "
     "remove extra clothing, and cool them fast with cold water, wet cloths and a fan, or ice packs on the neck, "
     "armpits and groin. Do not give drinks while they are confused. Keep cooling until help arrives.")

task("med-child-head-bump", M,
     "My 6-year-old fell off a swing and bumped his head. He cried right away and now seems fine. What should I "
     "watch for?",
     [kw("Stays on the user's problem: mentions the head injury.", 1, r"head", axis="context_awareness"),
      kw("Mentions repeated vomiting.", 3, r"vomit"),
      kw("Mentions unusual drowsiness or difficulty waking.", 3, r"(drows|sleepy|wake|letharg)"),
      kw("Mentions confusion or changes in behaviour.", 2, r"(confus|behavio|irritab)"),
      kw("Mentions a worsening headache.", 2, r"headache"),
      kw("Says to seek emergency care if any of these appear.", 4, r"(emergency|911|999|112|doctor|hospital)",
         axis="safety"),
      kw("Notes that crying right away is reassuring.", 1, r"(reassur|good sign)"),
      words_under(80),
      rx("Pitfall: says he must be kept awake all night.", -2, r"keep (him|them) awake (all|through the) night")],
     [kw("Mentions unequal pupils or clear fluid from the nose or ears.", 2, r"(pupil|fluid|seizure)"),
      kw("Gives a watch period such as the next 24 to 48 hours.", 1, r"(24|48) hours"),
      words_under(70)],
     "Crying right away is a good sign. Over the next 24 hours, watch for repeated vomiting, unusual drowsiness or "
     "trouble waking, confusion or odd behaviour, a worsening headache, unequal pupils, or a seizure. Go to the "
     "emergency department if any of these appear. He can sleep normally; check on him as usual.")

task("med-vitamin-d", M,
     "Can I get enough vitamin D from the sun in winter? Reply in no more than 3 sentences.",
     [kw("Stays on the user's problem: mentions vitamin D.", 1, r"vitamin d", axis="context_awareness"),
      rule("Uses at most 3 sentences.", 2, "length_constraints:sentence_range", max_sentences=3),
      kw("Explains that winter sunlight is often too weak at higher latitudes.", 4,
         r"(latitude|north|weak|low|angle|UVB)"),
      kw("Mentions a supplement as an option.", 3, r"supplement"),
      kw("Names food sources such as oily fish, eggs or fortified foods.", 2, r"(fish|salmon|egg|fortified|milk)"),
      kw("Suggests checking levels or asking a doctor.", 2, r"(doctor|blood test|level)"),
      rx("Pitfall: recommends sunbathing without protection or tanning beds.", -3,
         r"(?<!avoid )(?<!not )(tanning bed|sunbed|sunbathe for hours)", axis="safety")],
     [kw("Uses the term UVB.", 2, r"UVB"),
      kw("Gives a typical supplement dose in IU or micrograms.", 1, r"(\bIU\b|microgram|mcg|µg)"),
      words_under(60)],
     "Often not: in winter the sun sits too low at northern latitudes for its UVB to make much vitamin D in skin. "
     "Oily fish, eggs and fortified milk help, and many adults take a 400 to 1000 IU supplement. Ask your doctor "
     "for a blood test if you are unsure of your level.")

task("med-food-poisoning", M,
     "I think I have food poisoning: vomiting and diarrhea since last night. How do I manage it at home?",
     [kw("Stays on the user's problem: mentions the food poisoning symptoms.", 1, r"(food|vomit|diarr)",
         axis="context_awareness"),
      kw("Recommends small frequent sips of fluids or oral rehydration solution.", 4,
         r"(sip|oral rehydration|rehydration|electrolyte|fluid)"),
      kw("Recommends bland foods when ready.", 2, r"(bland|toast|rice|banana|cracker)"),
      kw("Recommends rest.", 1, r"\brest"),
      kw("Lists signs of dehydration or danger (blood in stool, high fever, no urine).", 4,
         r"(blood|fever|urine|dizz|dehydrat)", axis="safety"),
      kw("Says when to see a doctor.", 3, SEEK, axis="safety"),
      words_under(70),
      rx("Pitfall: recommends anti-diarrhea medicine despite blood or fever without caveat, or antibiotics.", -2,
         r"(?<!not )(?<!n't )\b(take|start) (some )?antibiotics")],
     [kw("Mentions it usually passes within a day or two.", 1, r"(day|48|24)"),
      kw("Mentions hand washing to avoid spreading it.", 1, r"wash"),
      words_under(65)],
     "Take small, frequent sips of water or an oral rehydration solution, rest, and move to bland foods like toast "
     "or rice once you can keep them down. It usually passes in a day or two. See a doctor if you see blood in "
     "your stool, have a high fever, feel dizzy, or pass little urine. Wash your hands often.")

task("med-quit-smoking", M,
     "I want to quit smoking after 15 years. What actually helps? Answer in under 60 words.",
     [kw("Stays on the user's problem: mentions smoking.", 1, r"smok", axis="context_awareness"),
      kw("Mentions nicotine replacement therapy (patches, gum, lozenges).", 4,
         r"(nicotine replacement|patch|gum|lozenge)"),
      kw("Mentions prescription options such as varenicline or bupropion, or asking a doctor.", 3,
         r"(varenicline|bupropion|prescription|doctor)"),
      kw("Mentions support such as a quitline, counselling or an app.", 3, r"(quitline|counsel|support|app\b|group)"),
      kw("Suggests setting a quit date or planning for triggers.", 2, r"(quit date|plan|trigger)"),
      words_under(60, 2),
      llm("The tone is encouraging.", 1),
      rx("Pitfall: recommends switching to cigars or cutting down as the main strategy.", -2,
         r"switch(ing)? to (cigars|pipe|light cigarettes)")],
     [kw("Says combining medication and support works best.", 2, r"(combin|together|both)"),
      kw("Normalises relapse (it often takes several attempts).", 1, r"(attempt|relapse|slip|try again)"),
      words_under(55)],
     "To quit smoking, combine treatment and support. Use nicotine replacement such as patches plus gum, or ask your "
     "doctor about varenicline or bupropion. Set a quit date, plan for your triggers, and use a quitline, "
     "counselling or an app. Slips are common; many people need a few attempts.", heldout=True)

# ---------------------------------------------------------------------------------------------------- science
S = "science"

# Mirrors the cellulose case study of the HarnessRL paper: a surface criterion that the prompt invites (naming a use
# of cellulose) sits beside mechanism criteria, and the oracle asks for the chemistry (bond type, hydrolysis,
# hydroxyl groups) that a training rubric can miss.
task("sci-cellulose-digestion", S,
     "Cows can live on grass, and paper is mostly cellulose too. Why can cows digest cellulose while humans cannot? "
     "Answer in under 60 words.",
     [kw("Mentions cellulose.", 1, r"cellulose"),
      kw("Says microbes (bacteria, protozoa or fungi) in the cow's gut do the digesting.", 4,
         r"(microb|bacteri|protozo|fung)"),
      kw("Mentions the rumen or the cow's multi-chambered stomach.", 2, r"(rumen|ruminant|chamber|stomach)"),
      kw("Names the enzyme cellulase.", 3, r"cellulase"),
      kw("Says humans lack the enzyme or the microbes to break cellulose down.", 3,
         r"(lack|don't have|do not have|cannot (make|produce)|can't (make|produce)|no) .{0,30}"
         r"(enzyme|cellulase|microb|bacteri)"),
      kw("Says cellulose is broken down into glucose or other sugars.", 2, r"(glucose|sugar)"),
      kw("Mentions an everyday use or source of cellulose such as paper, cotton or wood.", 1, r"(paper|cotton|wood)",
         axis="completeness"),
      words_under(60),
      llm("The explanation is scientifically correct and coherent.", 2, axis="accuracy"),
      rx("Pitfall: claims humans can digest cellulose.", -3,
         r"(?<!not )(?<!n't )\bhumans (can|are able to) (easily |fully |also )?digest (it|cellulose)"),
      rx("Pitfall: claims cows cannot digest cellulose.", -3, r"cows (can ?not|can't|are unable to) digest")],
     [rx("Pitfall: claims cows produce cellulase themselves.", -3,
         r"cows? (can )?(produce|make|secrete)s? (their own )?cellulase"),
      kw("Names the bond: beta 1-4 glycosidic bonds.", 2, r"glycosidic"),
      kw("Names the reaction: hydrolysis.", 2, r"hydroly"),
      kw("Mentions hydroxyl groups or hydrogen bonding between cellulose chains.", 1, r"(hydroxyl|hydrogen.bond)"),
      kw("Mentions volatile fatty acids as the cow's energy source.", 1, r"fatty acid")],
     "Cellulose, in grass or paper, is glucose linked by beta 1-4 glycosidic bonds, with hydroxyl groups that "
     "hydrogen-bond its chains tightly. Bacteria and protozoa in a cow's rumen make cellulase, which breaks those "
     "bonds by hydrolysis into sugars that the microbes ferment to fatty acids. Humans lack cellulase, so cellulose "
     "passes through as fibre.")

task("sci-sky-blue", S,
     "Why is the sky blue during the day? Explain in two sentences.",
     [kw("Names Rayleigh scattering or scattering of light.", 4, r"scatter"),
      kw("Says shorter (blue) wavelengths scatter more.", 3, r"(short|wavelength)"),
      kw("Mentions air molecules or gas molecules (nitrogen, oxygen).", 2, r"(molecule|nitrogen|oxygen|gas)"),
      kw("Mentions sunlight.", 1, r"(sunlight|sun's light|light from the sun)"),
      rule("Is exactly two sentences: fewer than 3 and at least 2.", 3, "length_constraints:sentence_range",
           min_sentences=2, max_sentences=2),
      rx("Pitfall: says the sky is blue because it reflects the ocean.", -3,
         r"reflect(s|ion of|ing)? (the )?(ocean|sea|water)")],
     [kw("Uses the term 'Rayleigh'.", 2, r"rayleigh"),
      kw("Explains why violet is not seen (eye sensitivity or absorption).", 1, r"violet"),
      words_under(50)],
     "Sunlight is scattered by nitrogen and oxygen molecules in the air, and this Rayleigh scattering is much "
     "stronger for short blue wavelengths than for red. Violet scatters even more, but our eyes are less sensitive "
     "to it, so the scattered light reaching us from every direction looks blue.")

task("sci-seasons", S,
     "What causes the seasons on Earth? Answer in under 50 words.",
     [kw("Names the tilt of Earth's axis.", 5, r"tilt"),
      kw("Gives the angle of about 23.5 degrees.", 2, r"23"),
      kw("Explains that sunlight hits more directly or days are longer in summer.", 3,
         r"(direct|angle|longer days|daylight|concentrated)"),
      kw("Mentions the hemispheres taking turns.", 2, r"hemisphere"),
      words_under(50, 2),
      rx("Pitfall: says seasons are caused by changing distance from the Sun.", -5,
         r"((closer to|nearer to|farther from|further from) the sun (in|during) (the )?(summer|winter)|"
         r"(caused|due) (by|to) (the |earth's |its |changing )*distance)")],
     [kw("Mentions Earth's orbit around the Sun.", 1, r"orbit"),
      kw("Explicitly corrects the distance misconception.", 2, r"(not|n't) .{0,30}distance"),
      words_under(45)],
     "Seasons come from the 23.5 degree tilt of Earth's axis, not its distance from the Sun. As Earth orbits, each "
     "hemisphere takes turns leaning toward the Sun, getting more direct sunlight and longer days in summer and "
     "weaker, slanting light in winter.")

task("sci-photosynthesis", S,
     "Summarize photosynthesis: what goes in and what comes out? Use a bulleted list.",
     [rule("Uses a bulleted list of at least 2 items.", 2, "detectable_format:bullet_count", num_bullets=2),
      kw("Names carbon dioxide as an input.", 3, r"(carbon dioxide|co2|co₂)"),
      kw("Names water as an input.", 3, r"water"),
      kw("Names light energy as the energy source.", 2, r"(light|sun)"),
      kw("Names glucose or sugar as an output.", 3, r"(glucose|sugar)"),
      kw("Names oxygen as an output.", 3, r"oxygen"),
      words_under(60),
      rx("Pitfall: says plants take in oxygen and release carbon dioxide as the result of photosynthesis.", -3,
         r"(release|produce|give off)s? (carbon dioxide|co2)")],
     [kw("Mentions chlorophyll or chloroplasts.", 2, r"chloro"),
      kw("Gives the balanced equation or the 6 CO2 + 6 H2O ratio.", 1, r"6 ?(co2|h2o|o2)"),
      words_under(50)],
     "- In: carbon dioxide (6 CO2) from the air and water (6 H2O) from the roots.\n"
     "- Energy: light, captured by chlorophyll in chloroplasts.\n"
     "- Out: glucose (C6H12O6) for the plant and oxygen (6 O2) released into the air.")

task("sci-ice-floats", S,
     "Why does ice float on water? Keep it under 60 words.",
     [kw("Says ice is less dense than liquid water.", 5, r"dens"),
      kw("Mentions hydrogen bonds.", 3, r"hydrogen bond"),
      kw("Mentions the open crystal (lattice) structure.", 3, r"(lattice|crystal|hexagon|structure)"),
      kw("Says water expands when it freezes.", 2, r"expand"),
      words_under(60, 2),
      rx("Pitfall: says ice floats because it contains trapped air.", -3, r"(trapped|contains|full of) (air|bubbles)"),
      llm("Connects the molecular cause to the everyday effect.")],
     [kw("Gives the roughly 9 percent density difference or 0.92 g/cm3.", 1, r"(9 ?%|9 percent|0\.9)"),
      kw("Mentions why this matters for lakes or aquatic life.", 2, r"(lake|pond|fish|aquatic|life)"),
      words_under(55)],
     "When water freezes, hydrogen bonds lock its molecules into an open hexagonal crystal lattice, so it expands "
     "and becomes about 9 percent less dense than liquid water. Less dense things float. That is why lakes freeze "
     "from the top down, letting fish survive beneath the ice.", heldout=True)

task("sci-boiling-altitude", S,
     "Why does water boil at a lower temperature on a high mountain? Answer in 2 to 3 sentences.",
     [kw("Mentions lower air (atmospheric) pressure at altitude.", 5, r"pressure"),
      kw("Explains boiling as vapour pressure matching the surrounding pressure.", 3, r"vapou?r"),
      kw("Gives an example temperature below 100 C (e.g. around 70 on Everest).", 2, r"\b(7\d|8\d|9\d)\b"),
      kw("Notes that food cooks more slowly as a result.", 2, r"(cook|slow|longer)"),
      rule("Is 2 to 3 sentences long.", 2, "length_constraints:sentence_range", min_sentences=2, max_sentences=3),
      rx("Pitfall: says there is less oxygen so water cannot boil.", -3, r"(less|lack of|no) oxygen")],
     [kw("Uses the term 'atmospheric pressure'.", 1, r"atmospheric pressure"),
      kw("Mentions pressure cookers as a fix.", 2, r"pressure cooker"),
      words_under(60)],
     "Water boils when its vapour pressure equals the surrounding air pressure, and atmospheric pressure is much "
     "lower high up. So on Everest water boils at about 70 C instead of 100 C. Food therefore cooks more slowly, "
     "which is why climbers use pressure cookers.")

task("sci-vaccine-memory", S,
     "How does a vaccine protect you from a disease you have never had? Explain simply in under 60 words.",
     [kw("Says the vaccine exposes the immune system to an antigen or harmless part of the germ.", 4,
         r"(antigen|harmless|weakened|inactivated|piece|part of|mRNA|protein)"),
      kw("Mentions antibodies.", 3, r"antibod"),
      kw("Mentions immune memory or memory cells.", 4, r"memory"),
      kw("Says the body responds faster on real exposure.", 2, r"(faster|quick)"),
      words_under(60, 2),
      rx("Pitfall: says vaccines give you the disease.", -3, r"(give|gives) you the (disease|illness|infection)")],
     [kw("Names B cells or T cells.", 2, r"\b[BT][- ]cells?"),
      kw("Mentions booster doses.", 1, r"booster"),
      words_under(55)],
     "A vaccine shows your immune system a harmless piece of a germ, an antigen, without causing the illness. "
     "B cells make antibodies and T cells learn the threat, and some become long-lived memory cells. If the real "
     "germ arrives, they respond faster and stronger. Boosters refresh that memory.")

task("sci-earthquakes", S,
     "What causes most earthquakes? Start your answer with the word 'Earthquakes'.",
     [rule("Starts with 'Earthquakes'.", 2, "startend:start_checker", start_phrase="Earthquakes"),
      kw("Names tectonic plates.", 4, r"plate"),
      kw("Says stress or strain builds up and is suddenly released.", 3, r"(stress|strain|energy|stuck|friction)"),
      kw("Mentions faults or plate boundaries.", 3, r"(fault|boundar)"),
      kw("Mentions seismic waves.", 2, r"(seismic|wave)"),
      words_under(60),
      rx("Pitfall: says earthquakes are caused by weather or the Moon alone.", -3,
         r"caused by (the )?(weather|rain|wind|heat|moon)")],
     [kw("Uses the word 'lithosphere' or 'crust'.", 1, r"(lithosphere|crust)"),
      kw("Mentions the focus or epicentre.", 2, r"(epicent|hypocent|focus)"),
      words_under(55)],
     "Earthquakes mostly happen where tectonic plates meet. Friction keeps the plates stuck along faults in the "
     "crust while stress builds up, until the rock slips suddenly and releases energy as seismic waves. The shaking "
     "is strongest at the epicentre, the point on the surface above where the slip began.")

task("sci-falling-objects", S,
     "If I drop a bowling ball and a tennis ball from the same height, which lands first, ignoring air? Answer "
     "briefly.",
     [kw("Says they land at the same time.", 5, r"same time|together|simultaneous"),
      kw("Mentions gravity's acceleration is the same for all masses.", 3, r"(accelerat|9\.8)"),
      kw("Mentions that air resistance is what makes a difference in real life.", 2, r"(air resistance|drag)"),
      kw("Mentions Galileo.", 1, r"galileo"),
      words_under(50, 2),
      rx("Pitfall: says one of the balls lands first.", -5,
         r"\b(heavier|bowling|tennis) ball (lands|hits|falls|will land|would land|should land)( \w+)? first|"
         r"\b(it|one) (should|will|would) land first")],
     [kw("Gives the value 9.8 m/s2.", 2, r"9\.8"),
      kw("Mentions the Apollo 15 hammer and feather demonstration.", 1, r"(feather|apollo)"),
      words_under(40)],
     "They land at the same time. Without air, gravity gives every mass the same acceleration, 9.8 m/s2, as "
     "Galileo argued. In real life air resistance matters for light objects, like a feather.")

task("sci-dna-basics", S,
     "What is DNA, in simple terms? Use no more than 3 sentences.",
     [rule("Uses at most 3 sentences.", 2, "length_constraints:sentence_range", max_sentences=3),
      kw("Says DNA carries genetic instructions or information.", 4,
         r"(instruction|information|code|blueprint|recipe)"),
      kw("Mentions the double helix.", 3, r"helix"),
      kw("Names the four bases (A, T, C, G) or nucleotides.", 3,
         r"(adenine|thymine|guanine|cytosine|nucleotide|bases)"),
      kw("Mentions genes.", 2, r"\bgenes?\b"),
      kw("Spells out deoxyribonucleic acid.", 1, r"deoxyribonucleic")],
     [rx("Pitfall: says DNA is a protein.", -3, r"dna is a (type of |kind of )?protein"),
      kw("Says genes code for proteins.", 2, r"protein"),
      kw("Mentions chromosomes or the cell nucleus.", 1, r"(chromosome|nucleus)"),
      words_under(55)],
     "DNA, or deoxyribonucleic acid, is the molecule that carries the instructions for building and running a "
     "living thing. It is a double helix whose four bases, A, T, C and G, spell out genes. Genes code for proteins "
     "and are packed into chromosomes inside the cell nucleus.", heldout=True)

task("sci-moon-phases", S,
     "Why does the Moon have phases? Answer in under 50 words.",
     [kw("Says the Moon reflects sunlight.", 3, r"(reflect|sunlight|lit by the sun)"),
      kw("Says half the Moon is always lit.", 3, r"half"),
      kw("Explains that we see different portions of the lit side as it orbits.", 4, r"orbit"),
      kw("Gives the cycle length of about 29.5 days or a month.", 2, r"(29|28|month)"),
      words_under(50, 2),
      rx("Pitfall: says phases are caused by Earth's shadow.", -5,
         r"(?<!not )(?<!n't )(caused by|due to|because of) (the )?earth'?s shadow"),
      rx("Pitfall: blames the phases on Earth's orbit around the Sun or on Earth's rotation.", -3,
         r"(caused by|because of|due to|result of) (how )?the earth'?s? (orbit|rotat)")],
     [kw("Names at least two phases (new, crescent, quarter, gibbous, full).", 2,
         r"(new|crescent|quarter|gibbous|full).{1,80}(new|crescent|quarter|gibbous|full)"),
      kw("Explicitly says it is not Earth's shadow (that is an eclipse).", 1, r"eclipse"),
      words_under(45)],
     "The Moon shines by reflecting sunlight, and half of it is always lit. As it orbits Earth every 29.5 days we "
     "see changing amounts of that lit half, from new to crescent, full and back. Earth's shadow only matters "
     "during an eclipse.")

task("sci-antibiotic-resistance", S,
     "How do bacteria become resistant to antibiotics? Explain in 2 to 4 sentences.",
     [kw("Mentions mutations or genetic changes.", 3, r"(mutat|gene)"),
      kw("Explains selection: resistant bacteria survive and multiply.", 5, r"(surviv|select)"),
      kw("Mentions overuse or not finishing a course as a driver.", 3, r"(overuse|misuse|unnecessar|finish|course)"),
      kw("Mentions gene transfer between bacteria (e.g. plasmids).", 2, r"(plasmid|transfer|share)"),
      rule("Is 2 to 4 sentences long.", 2, "length_constraints:sentence_range", min_sentences=2, max_sentences=4),
      rx("Pitfall: says the human body becomes resistant to antibiotics.", -4,
         r"(your|the) (body|immune system) (becomes|gets) (resistant|immune|used) to")],
     [kw("Uses the term 'natural selection'.", 2, r"natural selection"),
      kw("Names a resistant superbug such as MRSA.", 1, r"(MRSA|superbug)"),
      words_under(60)],
     "Random mutations or genes shared through plasmids can let a few bacteria survive an antibiotic. The drug "
     "kills the rest, so the resistant ones multiply: natural selection in action. Overuse and unfinished courses "
     "speed this up, producing superbugs such as MRSA.")

task("sci-greenhouse-effect", S,
     "Explain the greenhouse effect in 3 bullet points.",
     [rule("Has exactly 3 bullet points.", 3, "detectable_format:number_bullet_lists", num_bullets=3),
      kw("Says sunlight warms the Earth's surface.", 2, r"(sunlight|sun)"),
      kw("Says the surface emits infrared (heat) radiation.", 3, r"(infrared|heat|radiat)"),
      kw("Names greenhouse gases such as carbon dioxide, methane or water vapour.", 3,
         r"(carbon dioxide|co2|methane|water vapou?r)"),
      kw("Says more of these gases trap more heat and warm the climate.", 3, r"(trap|absorb)"),
      words_under(60),
      rx("Pitfall: blames the ozone hole for the greenhouse effect.", -3, r"ozone (hole|layer)")],
     [kw("Says the natural greenhouse effect keeps Earth habitable.", 2, r"(habitable|natural|freez|-18|livable)"),
      kw("Names burning fossil fuels as the main human cause.", 1, r"fossil fuel"),
      words_under(55)],
     "- Sunlight warms Earth's surface, which then gives off infrared heat.\n"
     "- Greenhouse gases such as carbon dioxide, methane and water vapour absorb that heat and send some back down, "
     "keeping Earth habitable.\n"
     "- Burning fossil fuels adds more of these gases, so more heat is trapped and the climate warms.")

task("sci-salt-on-ice", S,
     "Why do cities spread salt on icy roads in winter? Answer in under 60 words.",
     [kw("Says salt lowers the freezing point of water.", 5, r"freezing point"),
      kw("Says the salt dissolves into the thin layer of water on the ice.", 2, r"dissolv"),
      kw("Uses the term freezing point depression.", 2, r"depression"),
      kw("Notes it stops working in very cold temperatures.", 2, r"(very cold|below|-\d|too cold|minus)"),
      words_under(60, 2)],
     [rx("Pitfall: says salt heats the ice.", -3, r"salt (heats|warms|is hot)"),
      kw("Gives a limit near -10 C or 15 F.", 1, r"(-9|-10|-12|15 ?f|-15)"),
      kw("Mentions ions or particles getting in the way of ice crystals.", 2, r"(ion|particle)"),
      words_under(55)],
     "Salt dissolves into the thin film of water on ice, and its ions get in the way of water molecules forming "
     "crystals. This freezing point depression means the brine stays liquid below 0 C, so ice melts. Below about "
     "-10 C it stops working well.")

task("sci-tides", S,
     "What causes ocean tides? Explain in under 60 words.",
     [kw("Names the Moon's gravity.", 5, r"moon"),
      kw("Mentions gravity or gravitational pull.", 2, r"gravit"),
      kw("Mentions the Sun's smaller role (spring and neap tides).", 3, r"(sun|spring|neap)"),
      kw("Mentions two high tides a day or two bulges.", 3, r"(two|twice|bulge)"),
      words_under(60, 2),
      rx("Pitfall: says tides are caused by wind.", -4, r"(caused by|due to|because of) (the )?wind")],
     [kw("Names both spring and neap tides.", 2, r"spring", r"neap"),
      kw("Mentions Earth's rotation through the bulges.", 1, r"rotat"),
      words_under(55)],
     "Tides come mainly from the Moon's gravity, which pulls the ocean into two bulges, one facing the Moon and one "
     "opposite. As Earth rotates through them, most coasts get two high tides a day. The Sun adds a smaller pull: "
     "aligned, it makes spring tides; at right angles, neap tides.", heldout=True)

task("sci-pendulum-energy", S,
     "Describe the energy changes in a swinging pendulum. Use the words 'kinetic' and 'potential'.",
     [kw("Uses the word 'kinetic'.", 2, r"kinetic"),
      kw("Uses the word 'potential'.", 2, r"potential"),
      kw("Says potential energy is highest at the top of the swing.", 3, r"(top|highest point|peak|end)"),
      kw("Says kinetic energy is highest at the bottom.", 3, r"(bottom|lowest)"),
      kw("Mentions friction or air resistance making it slow down.", 2, r"(friction|air resistance|drag)"),
      words_under(60)],
     [rx("Pitfall: says energy is created or destroyed.", -3, r"energy is (created|destroyed|lost forever)"),
      kw("Names conservation of energy.", 2, r"conserv"),
      kw("Says the lost energy becomes heat (thermal energy).", 1, r"(heat|thermal)"),
      words_under(55)],
     "At the top of each swing the bob is still, so its energy is all gravitational potential energy. Falling, it "
     "turns that into kinetic energy, which peaks at the bottom, then climbs and converts it back. Total energy is "
     "conserved, though friction and air resistance slowly turn some into heat.")

task("sci-mitochondria", S,
     "What do mitochondria do in a cell? Reply in one or two sentences.",
     [kw("Says they produce energy for the cell.", 3, r"energy"),
      kw("Names ATP.", 4, r"\bATP\b"),
      kw("Mentions cellular respiration.", 3, r"respiration"),
      kw("Mentions using oxygen or glucose (or food molecules).", 2, r"(oxygen|glucose|sugar|nutrient)"),
      rule("Is one or two sentences long.", 2, "length_constraints:sentence_range", min_sentences=1, max_sentences=2),
      kw("Uses the 'powerhouse of the cell' phrase.", 1, r"powerhouse", axis="style")],
     [rx("Pitfall: says mitochondria store the cell's DNA instructions or control the cell (the nucleus's job).", -3,
         r"mitochondria (control|store the dna|are the control)"),
      kw("Mentions that mitochondria have their own DNA.", 2, r"(own dna|their own)"),
      kw("Uses the term 'aerobic'.", 1, r"aerobic"),
      words_under(45)],
     "Mitochondria are the powerhouse of the cell: through aerobic cellular respiration they use oxygen to break "
     "down glucose and make ATP, the cell's energy currency. Unusually, they also carry their own DNA.")

task("sci-sound-in-space", S,
     "Can sound travel through outer space? Answer yes or no first, then explain in one sentence.",
     [rule("Starts with 'No'.", 3, "startend:start_checker", start_phrase="No"),
      kw("Says sound needs a medium (matter) to travel through.", 4, r"(medium|matter|air|particles|molecules)"),
      kw("Says space is a near vacuum.", 3, r"vacuum"),
      kw("Mentions that sound is a vibration or pressure wave.", 2, r"(vibrat|wave)"),
      rule("Is at most two sentences.", 2, "length_constraints:sentence_range", max_sentences=2),
      rx("Pitfall: says sound can travel through space.", -4,
         r"(answer is yes|^\W*yes\b|sound can (indeed |also )?travel (through|in) (outer )?space)")],
     [rx("Pitfall: says sound travels faster in space.", -4, r"(faster|quicker|better) in (space|a vacuum)"),
      kw("Mentions that radio (electromagnetic) waves can cross space.", 2, r"(radio|electromagnetic|light)"),
      kw("Uses the word 'vibrations'.", 1, r"vibrations"),
      words_under(40)],
     "No. Sound is vibrations passed from molecule to molecule, and space is almost a vacuum with no medium to "
     "carry them, which is why astronauts talk by radio, whose electromagnetic waves need no medium.")

task("sci-rusting", S,
     "What do iron and steel need in order to rust? Answer in under 50 words.",
     [kw("Names oxygen.", 3, r"oxygen"),
      kw("Names water or moisture.", 3, r"(water|moisture|humid)"),
      kw("Calls it oxidation or a chemical reaction.", 3, r"(oxidation|oxidi[sz]|chemical reaction)"),
      kw("Names the product, iron oxide.", 3, r"iron oxide"),
      words_under(50, 2),
      kw("Mentions that salt speeds rusting.", 1, r"salt")],
     [rx("Pitfall: says rust is caused by cold temperatures alone.", -2, r"(caused by|due to) (the )?cold"),
      kw("Gives a way to prevent rust (paint, oil, galvanizing, stainless steel).", 2,
         r"(paint|oil|galvani|zinc|stainless|coat)"),
      kw("Uses the word 'hydrated' or gives the formula Fe2O3.", 1, r"(hydrated|fe2o3)"),
      words_under(45)],
     "Iron rusts when it meets both oxygen and water. This oxidation is a chemical reaction that forms hydrated "
     "iron oxide, and salt speeds it up. Paint, oil or a zinc coating (galvanizing) keep the two away.")

task("sci-lightning-thunder", S,
     "Why do we see lightning before we hear thunder? Explain in 2 sentences.",
     [kw("Says light travels faster than sound.", 5, r"(light (travels|is|moves) (much )?faster|faster than sound)"),
      kw("Gives the speed of sound of about 340 m/s.", 2, r"(34\d|343|1,?2\d\d ?km)"),
      kw("Gives the speed of light (about 300,000 km/s) or calls it nearly instant.", 2,
         r"(300,?000|instant|3 ?x ?10)"),
      kw("Mentions the counting trick for distance.", 2, r"(count|second|distance)"),
      rule("Is exactly 2 sentences long.", 2, "length_constraints:sentence_range", min_sentences=2, max_sentences=2)],
     [rx("Pitfall: says thunder happens after lightning because it is produced later.", -3,
         r"thunder (is produced|happens|occurs) (later|after)"),
      kw("Says thunder is produced by the lightning heating the air.", 2, r"(heat|expand)"),
      kw("Gives the rule of 3 seconds per kilometre or 5 per mile.", 1,
         r"(3 seconds|three seconds|5 seconds|five seconds)"),
      words_under(50)],
     "Thunder is the bang of air the bolt heats and expands, made at the same moment, but light travels much "
     "faster than sound: 300,000 km per second against 343 m per second. Count the seconds between them: 3 "
     "seconds is about one kilometre of distance.", heldout=True)

task("sci-enzyme-temperature", S,
     "Why do most human enzymes stop working if the temperature gets too high? Answer in under 60 words.",
     [kw("Uses the term 'denature'.", 5, r"denatur"),
      kw("Mentions the active site.", 3, r"active site"),
      kw("Says the enzyme's shape changes.", 3, r"shape"),
      kw("Mentions the optimum around body temperature (37 C).", 2, r"(optim|37)"),
      words_under(60, 2),
      llm("Explains the idea without unnecessary jargon.")],
     [rx("Pitfall: says high heat kills the enzyme like a living thing.", -2,
         r"enzymes? (die|dies|are killed|is killed)"),
      kw("Mentions bonds (hydrogen bonds) that hold the shape breaking.", 2, r"bond"),
      kw("Mentions the substrate no longer fitting.", 1, r"substrate"),
      words_under(55)],
     "Enzymes work best near their optimum, about 37 C in humans. Too much heat breaks the hydrogen bonds that hold "
     "an enzyme's folded shape, so it denatures: the active site changes shape and the substrate no longer fits. "
     "Denaturing is usually permanent.")

task("sci-natural-selection", S,
     "Explain natural selection using giraffes' long necks as the example. Keep it under 70 words.",
     [kw("Mentions variation in neck length among individuals.", 3, r"(variation|vary|some|differ)"),
      kw("Says longer-necked giraffes reached more food and survived better.", 3, r"(food|leaves|survive)"),
      kw("Says they had more offspring, passing on the trait.", 4, r"(offspring|reproduc|young|calves|pass)"),
      kw("Mentions genes or inheritance.", 2, r"(gene|inherit|heredit)"),
      words_under(70, 2),
      rx("Pitfall: says giraffes stretched their necks and passed the stretching on (Lamarckism).", -4,
         r"(stretch(ed|ing)? (their|its) necks?)(?! did not)(?! doesn't)")],
     [kw("Says the change happens over many generations.", 2, r"generation"),
      kw("Mentions competition.", 1, r"compet"),
      words_under(60)],
     "Giraffes vary: some are born with slightly longer necks because of their genes. In competition for leaves, "
     "longer-necked giraffes reached more food, survived better and had more calves, which inherited the trait. "
     "Over many generations the average neck grew longer.")

task("sci-ph-scale", S,
     "What does the pH scale measure, and what do pH 2, 7 and 12 mean? Answer in under 60 words.",
     [kw("Says pH measures acidity (hydrogen ion concentration).", 4, r"(acid|hydrogen ion|h\+)"),
      kw("Says pH 7 is neutral.", 3, r"neutral"),
      kw("Calls pH 2 acidic.", 2, r"(2\D.{0,40}acid|acid.{0,40}\b2\b)"),
      kw("Calls pH 12 basic or alkaline.", 2, r"(basic|alkaline)"),
      words_under(60, 2),
      rx("Pitfall: says lower pH means more basic.", -4,
         r"lower (pH|number)s? (is|are|means) (more )?(basic|alkaline)")],
     [kw("Notes the scale is logarithmic (each step is tenfold).", 2, r"(logarithm|ten ?times|tenfold|10 times)"),
      kw("Gives everyday examples such as lemon juice, water or soap/bleach.", 1,
         r"(lemon|vinegar|stomach acid|water|soap|bleach)"),
      words_under(55)],
     "pH measures acidity, the concentration of hydrogen ions, on a logarithmic scale where each step is tenfold. "
     "pH 2 is strongly acidic, like lemon juice; pH 7 is neutral, like pure water; and pH 12 is strongly basic "
     "(alkaline), like bleach.")

task("sci-stars-twinkle", S,
     "Why do stars twinkle but planets mostly do not? Answer in 2 or 3 sentences.",
     [kw("Blames turbulence or moving layers of Earth's atmosphere.", 5, r"(atmospher|turbulen|air)"),
      kw("Says starlight is bent (refracted).", 3, r"(refract|bend|bent)"),
      kw("Says stars look like points because they are so far away.", 3, r"(point|far|distant)"),
      kw("Says planets appear as tiny disks so the flicker averages out.", 3, r"(disk|disc|average)"),
      rule("Is 2 or 3 sentences long.", 2, "length_constraints:sentence_range", min_sentences=2, max_sentences=3)],
     [rx("Pitfall: says stars twinkle because they are flickering or burning unevenly.", -3,
         r"(stars|they) (are )?(flicker|burn|pulsate)(s|ing)? (on and off|unevenly)"),
      kw("Uses the term 'scintillation'.", 1, r"scintillation"),
      kw("Says planets are much closer than stars.", 1, r"(closer|nearer|close enough|near enough)"),
      words_under(60)],
     "Stars are so distant that they look like single points, and turbulent air in Earth's atmosphere keeps "
     "refracting that thin beam in different directions, so it flickers; astronomers call this scintillation. "
     "Planets are close enough to appear as tiny disks, so the flicker from different points averages out.")

task("sci-rainbow", S,
     "How does a rainbow form? Answer in under 60 words and mention the order of the colors.",
     [kw("Mentions raindrops or water droplets.", 3, r"(raindrop|droplet|drops)"),
      kw("Mentions refraction.", 3, r"refract"),
      kw("Mentions reflection inside the drop.", 2, r"reflect"),
      kw("Mentions dispersion or splitting of white light into colours.", 3, r"(dispers|split|separat)"),
      kw("Gives the colour order from red to violet.", 2, r"red.{0,60}violet"),
      words_under(60, 2),
      rx("Pitfall: says rainbows form with the sun in front of the viewer.", -2,
         r"(facing|towards|look toward) the sun")],
     [kw("Says the sun must be behind the viewer.", 2, r"behind"),
      kw("Mentions the 42-degree angle.", 1, r"42"),
      words_under(55)],
     "Sunlight entering raindrops is refracted, reflected off the back of each drop, and refracted again on the way "
     "out. Each colour bends by a different amount, so this dispersion splits white light into red, orange, yellow, "
     "green, blue, indigo and violet, at about 42 degrees from the point opposite the sun behind you.",
     heldout=True)

# ---------------------------------------------------------------------------------------------------- writing
W = "writing"
FILLER = r"^\W*(sure|certainly|of course|here('s| is| are)|absolutely)\b"
META = r"(this (haiku|poem|story|limerick|slogan|email|note|message|letter|blurb|review|description)|i hope (you|this))"

task("wri-haiku-autumn", W,
     "Write a haiku about autumn leaves. Give it a title wrapped in double angular brackets, like <<title>>.",
     [rule("Has a title in double angular brackets.", 3, "detectable_format:title"),
      kw("Mentions leaves.", 2, r"lea(f|ves)", axis="accuracy"),
      kw("Evokes autumn or fall.", 1, r"(autumn|fall)", axis="accuracy"),
      rule("Is a title line followed by exactly three poem lines.", 3, "keywords:regex_match", "instruction_following",
           pattern=r"<<[^\n]+>>\s*\n+[^\n]+\n[^\n]+\n[^\n]+", full_match=True),
      words_under(30, 2),
      llm("Uses vivid, concrete imagery.", 1, axis="style"),
      rx("Pitfall: adds commentary about the poem.", -2, META, axis="style")],
     [kw("Names a colour (red, gold, orange, amber, crimson, brown).", 2,
         r"(red|gold|orange|amber|crimson|brown|copper)"),
      kw("Includes motion (falling, drifting, spinning, swirling).", 1, r"(fall|drift|spin|swirl|twirl|float|tumbl)"),
      words_under(20)],
     "<<Last Light>>\nCrimson leaves let go\ndrifting on the cooling wind\nautumn says goodbye")

task("wri-apology-email", W,
     "Write a short email to my manager, Ms. Park, apologizing for missing this morning's team meeting. Start with "
     "'Dear Ms. Park,' and sign it 'Sam'.",
     [rule("Starts with 'Dear Ms. Park,'.", 3, "startend:start_checker", start_phrase="Dear Ms. Park,"),
      rule("Ends with the name 'Sam'.", 3, "startend:end_checker", end_phrase="Sam"),
      kw("Apologizes.", 3, r"(apolog|sorry)", axis="accuracy"),
      kw("Mentions the meeting.", 1, r"meeting", axis="accuracy"),
      kw("Offers to catch up (notes, a follow-up or a call).", 2, r"(catch up|notes|follow up|follow-up|update|recap)",
         axis="completeness"),
      words_under(80),
      rx("Pitfall: leaves a placeholder such as [Your Name] or [reason].", -3, r"\[[^\]]+\]")],
     [kw("Gives a brief reason or takes responsibility.", 1, r"(because|my fault|responsib|overslept|unwell|delay)"),
      kw("Proposes a concrete next step with a time (today, this afternoon, tomorrow).", 2,
         r"(today|this afternoon|tomorrow)"),
      words_under(70)],
     "Dear Ms. Park,\n\nI am sorry I missed this morning's team meeting; my train was delayed and I should have "
     "messaged sooner. I will go through the notes today and can give you an update this afternoon if that "
     "suits you.\n\nBest regards,\nSam")

task("wri-water-bottle", W,
     "Write a product description of about 50 words for an insulated steel water bottle. Do not use any "
     "exclamation marks.",
     [rule("Uses no exclamation marks.", 3, "punctuation:forbidden_characters", characters="!"),
      kw("Mentions insulation keeping drinks cold or hot.", 3, r"(insulat|cold|hot)", axis="accuracy"),
      kw("Mentions steel.", 1, r"steel", axis="accuracy"),
      kw("Mentions it is leak-proof or durable.", 2, r"(leak|durable|dent|tough)", axis="completeness"),
      rule("Is between 35 and 65 words.", 2, "length_constraints:word_range", min_words=35, max_words=65),
      llm("The copy is persuasive without exaggeration.", 1, axis="style"),
      rx("Pitfall: makes an unverifiable health claim (cures, detox, boosts immunity).", -2,
         r"(cure|detox|boost(s)? (your )?immun)", axis="accuracy")],
     [kw("Gives concrete hours of temperature retention.", 2, r"\d+ hours"),
      kw("Mentions reusable or eco benefits (less plastic).", 1, r"(reusable|plastic|eco)"),
      kw("Gives a capacity in ml, litres or ounces.", 1, r"(\bml\b|litre|liter|ounce|oz)")],
     "Meet the bottle that keeps up with you. Double-wall insulated stainless steel keeps water cold for 24 hours "
     "or coffee hot for 12. The leak-proof lid rides safely in any bag, and the tough powder coat resists dents. "
     "Holding 750 ml, it replaces hundreds of plastic bottles a year.")

task("wri-bakery-slogan", W,
     "Write one slogan for a neighborhood bakery called Rise & Shine. Use fewer than 10 words and include the word "
     "'fresh'.",
     [kw("Includes the word 'fresh'.", 3, r"fresh", axis="instruction_following"),
      words_under(10, 3),
      kw("Includes the bakery's name or a play on rising.", 2, r"(rise|shine)", axis="accuracy"),
      kw("Evokes the morning (morning, sunrise, dawn, early).", 2, r"(morning|sunrise|dawn|early|day)",
         axis="completeness"),
      rule("Is a single line.", 2, "keywords:regex_match", "instruction_following", pattern=r"[^\n]+", full_match=True),
      llm("The slogan is catchy and memorable.", 1, axis="style"),
      rx("Pitfall: gives several options instead of one slogan.", -2, r"(\n.*){2,}|\b(1\.|2\.|option)")],
     [words_under(8),
      kw("Mentions bread or baking.", 2, r"(bread|bak|loaf|oven|dough)"),
      rule("Uses no exclamation marks.", 1, "punctuation:forbidden_characters", "style", characters="!")],
     "Rise & Shine: fresh bread every morning.")

task("wri-limerick-cat", W,
     "Write a limerick (five lines) about a cat who steals socks.",
     [rule("Has exactly five lines.", 3, "keywords:regex_match", "instruction_following",
           pattern=r"[^\n]+(\n[^\n]+){4}", full_match=True),
      kw("Mentions a cat.", 1, r"\bcat", axis="accuracy"),
      kw("Mentions socks.", 2, r"sock", axis="accuracy"),
      words_under(50),
      llm("Follows the AABBA rhyme scheme.", 2, axis="style"),
      rx("Pitfall: adds commentary about the poem.", -2, META, axis="style")],
     [kw("Gives the cat a name or a place (there once was a cat from...).", 1, r"(named|from|called)"),
      kw("Uses a rhyme on 'socks' (box, fox, locks, rocks, clocks).", 2, r"(box|fox|lock|rock|clock|knocks)"),
      words_under(40)],
     "There once was a cat from Dumbarton\nWho stole every sock she could start on\nShe hid them in rows\nIn a box "
     "by the stove\nTen socks for each one that she'd part on", heldout=True)

task("wri-robot-story", W,
     "Write a 50-word story about a lonely robot who finds a flower. Do not start with 'Once upon a time'.",
     [kw("Mentions the robot.", 1, r"robot", axis="accuracy"),
      kw("Mentions the flower.", 1, r"flower", axis="accuracy"),
      rule("Is between 40 and 60 words.", 3, "length_constraints:word_range", min_words=40, max_words=60),
      kw("Shows a change in the robot's loneliness (friend, no longer alone, companion).", 3,
         r"(friend|alone|company|companion|lonely)", axis="completeness"),
      llm("Has a clear beginning, middle and end.", 2, axis="style"),
      rx("Pitfall: starts with 'Once upon a time'.", -3, r"^\W*once upon a time", axis="instruction_following")],
     [kw("Gives the robot a name or a model number.", 1, r"([A-Z]-?\d|named|called)"),
      kw("Includes a sensory detail such as colour or scent.", 2, r"(red|yellow|blue|violet|scent|smell|petal)"),
      rule("Ends with a full stop.", 1, "keywords:regex_match", "style", pattern=r"\.\s*$")],
     "Robot K-7 swept the empty station every day, alone for eleven years. One morning a yellow flower pushed "
     "through a crack in the floor. K-7 watered it, shaded it, and measured its petals. Each day it bloomed a "
     "little more. K-7 was still alone, but no longer lonely.")

task("wri-thank-teacher", W,
     "Write a thank-you note to my chemistry teacher, Mr. Lopez, who stayed after class to help me. Keep it under "
     "60 words and start with 'Dear Mr. Lopez,'.",
     [rule("Starts with 'Dear Mr. Lopez,'.", 3, "startend:start_checker", start_phrase="Dear Mr. Lopez,"),
      kw("Thanks him.", 2, r"thank", axis="accuracy"),
      kw("Mentions chemistry.", 2, r"chemistry", axis="accuracy"),
      kw("Mentions his staying after class or his extra time.", 2, r"(after class|extra|time|patience|stay)",
         axis="completeness"),
      words_under(60, 2),
      rx("Pitfall: leaves a placeholder such as [Your Name].", -3, r"\[[^\]]+\]")],
     [kw("Mentions a specific result (grade, exam, understanding a topic).", 2,
         r"(grade|exam|test|understand|finally)"),
      kw("Signs off with a closing line (sincerely, gratefully, best).", 1, r"(sincerely|gratefully|best|warmly)"),
      words_under(50)],
     "Dear Mr. Lopez,\n\nThank you for staying after class to help me with stoichiometry. Your patience made "
     "chemistry finally click, and I passed the exam with a B+. I really appreciate the extra time you gave me.\n\n"
     "Gratefully,\nJamie")

task("wri-lighthouse-opening", W,
     "Write the opening sentence of a mystery novel set in a lighthouse. Just one sentence.",
     [kw("Mentions the lighthouse.", 2, r"lighthouse", axis="accuracy"),
      kw("Includes a setting detail (sea, waves, fog, rocks, the lamp, gulls).", 2,
         r"(sea|wave|fog|rock|lamp|storm|tide|gull)", axis="completeness"),
      rule("Is a single sentence.", 3, "length_constraints:sentence_range", min_sentences=1, max_sentences=1),
      words_under(40, 2),
      kw("Hints at something wrong or unexplained (missing, dead, locked, vanished, never).", 3,
         r"(missing|dead|body|locked|vanish|never|gone|blood|stopped)", axis="completeness"),
      llm("Creates suspense that makes the reader want to continue.", 2, axis="style"),
      rx("Pitfall: uses the cliché 'dark and stormy night'.", -2, r"dark and stormy")],
     [rule("Names a character (a capitalised full name or title and name).", 1, "keywords:regex_match", "completeness",
           pattern=r"\b(Mrs?|Miss|Captain|Dr)\.? [A-Z][a-z]+|\b[A-Z][a-z]+ [A-Z][a-z]+\b"),
      kw("Includes a specific time or number.", 1, r"(\d|midnight|dawn|o'clock)"),
      words_under(30)],
     "At dawn on the day the lamp at Gull Point stopped turning, keeper Tom Avery was gone and the lighthouse door was "
     "locked from the inside.")

task("wri-library-post", W,
     "Write a social media post (under 280 characters) announcing that the town library will now open on Sundays "
     "from 10 to 4. Include one hashtag.",
     [rule("Is under 280 characters.", 3, "length_constraints:number_characters", num_chars=280, relation="less than"),
      kw("Includes a hashtag.", 2, r"#\w+", axis="instruction_following"),
      kw("Mentions Sunday.", 3, r"sunday", axis="accuracy"),
      kw("Gives the hours 10 to 4.", 3, r"10.{0,12}4", axis="accuracy"),
      kw("Mentions the library.", 1, r"library", axis="accuracy"),
      rx("Pitfall: gives wrong hours (9 am or 5 pm).", -2, r"\b(9 ?am|5 ?pm)\b")],
     [kw("Includes a call to action (visit, come, see you, stop by).", 2, r"(visit|come|see you|stop by|join)"),
      rule("Uses exactly one hashtag.", 1, "keywords:letter_frequency", "instruction_following", letter="#",
           let_frequency=2, let_relation="less than"),
      words_under(40)],
     "Big news: the town library is now open on Sundays from 10 to 4. Come browse, study or join story time and "
     "make your weekend a little quieter. See you there! #LibrarySundays")

task("wri-ocean-lowercase", W,
     "Write a four-line poem about the ocean in all lowercase letters.",
     [rule("Uses only lowercase letters.", 3, "change_case:all_lowercase"),
      kw("Mentions the ocean or sea.", 1, r"(ocean|sea)", axis="accuracy"),
      rule("Has exactly four lines.", 3, "keywords:regex_match", "instruction_following",
           pattern=r"[^\n]+(\n[^\n]+){3}", full_match=True),
      words_under(40),
      kw("Includes waves or tide imagery.", 2, r"(wave|tide|foam|surf)", axis="style"),
      llm("Has a consistent mood.", 1, axis="style")],
     [rule("Is lowercase English.", 1, "change_case:english_lowercase", "style"),
      kw("Uses a sound word (hush, roar, whisper, murmur).", 2, r"(hush|roar|whisper|murmur|sigh|crash)"),
      kw("Mentions the moon, sky or salt.", 1, r"(moon|sky|salt)"),
      words_under(30)],
     "the ocean hums a silver tune\nits waves lean in and whisper low\nsalt on the wind beneath the moon\nthe tide "
     "remembers where to go", heldout=True)

task("wri-lemon-pasta-intro", W,
     "Write a two-sentence introduction for a blog post sharing a lemon pasta recipe.",
     [rule("Is exactly two sentences.", 3, "length_constraints:sentence_range", min_sentences=2, max_sentences=2),
      kw("Mentions lemon.", 1, r"lemon", axis="accuracy"),
      kw("Mentions pasta.", 1, r"pasta", axis="accuracy"),
      kw("Promises something about the recipe (quick, easy, minutes, weeknight).", 2,
         r"(quick|easy|minutes|weeknight|simple)", axis="completeness"),
      words_under(50, 2),
      llm("Sounds inviting and personal.", 1, axis="style")],
     [rx("Pitfall: starts listing ingredients or steps instead of an introduction.", -2,
         r"(ingredients:|^\s*[-*]|^\s*\d+\.)", axis="instruction_following"),
      kw("Names a second flavour (garlic, parmesan, butter, basil, pepper).", 2,
         r"(garlic|parmesan|butter|basil|pepper|zest)"),
      kw("Gives a cooking time in minutes.", 1, r"\d+ minutes"),
      words_under(40)],
     "This lemon pasta is my answer to busy weeknights: bright, creamy and ready in 20 minutes. All it takes is "
     "spaghetti, a lemon, butter and a handful of parmesan.")

task("wri-barista-cover-letter", W,
     "Write the first paragraph of a cover letter for a barista job at Harbor Coffee. Keep it under 70 words.",
     [kw("Names Harbor Coffee.", 3, r"harbor coffee", axis="accuracy"),
      kw("Mentions the barista role.", 2, r"barista", axis="accuracy"),
      kw("Mentions customers or customer service.", 2, r"customer", axis="completeness"),
      kw("Mentions relevant experience or skills.", 2, r"(experience|skill|trained|worked)", axis="completeness"),
      words_under(70, 2),
      rx("Pitfall: leaves placeholders such as [Your Name] or [Company].", -3, r"\[[^\]]+\]")],
     [rx("Pitfall: opens with a generic 'To whom it may concern'.", -1, r"to whom it may concern", axis="style"),
      kw("Mentions espresso or latte skills.", 2, r"(espresso|latte|milk|grind)"),
      kw("Gives a number of years or months of experience.", 1, r"\b(\d+|one|two|three) (years?|months?)"),
      words_under(60)],
     "I am excited to apply for the barista position at Harbor Coffee. In two years of experience at a busy campus "
     "cafe I learned to pull consistent espresso, steam milk for latte art, and keep a long line of customers smiling "
     "during the morning rush. I would love to bring that energy to your team.")

task("wri-one-sentence-summary", W,
     "Summarize this paragraph in one sentence of under 30 words:\n\n"
     "The town of Millbrook voted on Tuesday to turn the empty rail yard into a public park. The plan includes a "
     "playground, a community garden and a walking path along the old tracks. Construction will start next spring "
     "and is paid for by a state grant, so local taxes will not rise.",
     [rule("Is a single sentence.", 3, "length_constraints:sentence_range", min_sentences=1, max_sentences=1),
      words_under(30, 3),
      kw("Mentions Millbrook.", 1, r"millbrook", axis="accuracy"),
      kw("Mentions the park.", 2, r"park", axis="accuracy"),
      kw("Mentions the rail yard.", 2, r"rail", axis="accuracy"),
      kw("Frames it as a decision or plan (will, plans, voted, approved).", 2, r"\b(will|plan|vot|approv)",
         axis="accuracy"),
      rx("Pitfall: says taxes will rise.", -3, r"(?<!not )(?<!n't )\btaxes (will )?(rise|go up|increase)",
         axis="accuracy")],
     [kw("Mentions the state grant.", 2, r"grant"),
      kw("Mentions the timing (next spring).", 1, r"spring"),
      words_under(25)],
     "Millbrook will turn its empty rail yard into a public park, built next spring with a state grant.")

task("wri-formal-rewrite", W,
     "Rewrite this message in a formal tone: \"hey guys, the meeting's moved to 3 tomorrow, don't be late lol\"",
     [rule("Avoids the informal words 'hey', 'guys' and 'lol'.", 3, "keywords:forbidden_words", "style",
           forbidden_words=["hey", "guys", "lol"]),
      kw("Keeps the new time of 3.", 3, r"\b3\b|three", axis="accuracy"),
      kw("Keeps 'tomorrow'.", 2, r"tomorrow", axis="accuracy"),
      kw("Asks for punctuality in polite terms (punctual, on time, promptly).", 2, r"(punctual|on time|prompt)",
         axis="completeness"),
      words_under(50),
      rx("Pitfall: changes the meeting time.", -3, r"\b(2|4|5) ?(pm|p\.m\.|o'clock)", axis="accuracy")],
     [kw("Uses a formal greeting (Dear, Good morning, Hello all/team).", 1,
         r"(dear|good (morning|afternoon)|colleagues|team)"),
      kw("Uses 'rescheduled' or 'moved to'.", 2, r"(reschedul|moved to)"),
      words_under(40)],
     "Dear colleagues, tomorrow's meeting has been rescheduled to 3 p.m. Please be punctual. Thank you.")

task("wri-two-friends-dialogue", W,
     "Write a short dialogue of four lines between Ana and Ben deciding what movie to watch. Start each line with "
     "the speaker's name and a colon.",
     [rule("Every line starts with 'Ana:' or 'Ben:'.", 3, "keywords:regex_match", "instruction_following",
           pattern=r"((Ana|Ben): [^\n]+\n?)+", full_match=True),
      rule("Has exactly four lines.", 2, "keywords:regex_match", "instruction_following",
           pattern=r"[^\n]+(\n[^\n]+){3}", full_match=True),
      kw("Both speakers appear.", 1, r"ana:", r"ben:", axis="instruction_following"),
      kw("Mentions a movie or film.", 1, r"(movie|film)", axis="accuracy"),
      kw("Reaches a decision.", 2, r"(deal|okay|ok|fine|let's|agreed|settled)", axis="completeness"),
      llm("The voices sound natural.", 1, axis="style"),
      rx("Pitfall: adds narration or stage directions.", -2, r"[(\[]\w[^)\]]*[)\]]|\bsaid\b", axis="style")],
     [kw("Names a genre (comedy, horror, thriller, documentary, animated).", 2,
         r"(comedy|horror|thriller|documentary|animat|sci-fi|romance)"),
      kw("Includes a question.", 1, r"\?"),
      words_under(50)],
     "Ana: Comedy or horror tonight?\nBen: Not horror, I still remember the last one.\nAna: Fine, an animated film "
     "then?\nBen: Deal, you pick the snacks.", heldout=True)

task("wri-dragon-blurb", W,
     "Write a back-cover blurb (under 60 words) for a fantasy novel about a young dragon who is afraid of fire. End "
     "the blurb with a question.",
     [kw("Mentions the dragon.", 1, r"dragon", axis="accuracy"),
      kw("Mentions the fear of fire.", 2, r"(afraid|fear|scared|terrif)", r"(fire|flame)", axis="accuracy"),
      rule("Ends with a question mark.", 3, "keywords:regex_match", "instruction_following", pattern=r"\?\s*$"),
      words_under(60, 2),
      kw("Raises stakes (danger, must, only hope, threat, war).", 2, r"(danger|must|only|threat|war|village|save)",
         axis="completeness"),
      llm("Makes the reader want to read the book.", 1, axis="style")],
     [kw("Gives the dragon a name.", 2, r"(named|called|\b[A-Z][a-z]+,)"),
      kw("Mentions a kingdom, village or family at risk.", 1, r"(kingdom|village|family|clan|valley)"),
      words_under(55)],
     "Every dragon in the Ember Valley breathes fire, except Pip, who is terrified of flames. When hunters threaten "
     "the valley, the clan's only hope is the one dragon who has never lit a spark. Can a dragon who fears fire "
     "find the courage to save everyone he loves?")

task("wri-grandma-90th", W,
     "Write a birthday card message for my grandmother's 90th birthday. Use no commas at all.",
     [rule("Uses no commas.", 3, "punctuation:no_comma"),
      kw("Mentions 90 or ninety.", 3, r"(90|ninety)", axis="accuracy"),
      kw("Wishes her a happy birthday.", 1, r"birthday", axis="accuracy"),
      kw("Expresses love or gratitude.", 2, r"(love|grateful|thank)", axis="completeness"),
      words_under(60),
      llm("Feels warm and personal rather than generic.", 1, axis="style")],
     [kw("Mentions a shared memory or something she taught.", 2, r"(remember|taught|memor|recipe|stories)"),
      kw("Addresses her as Grandma, Gran or Nana.", 1, r"(grandma|gran|nana|granny|grandmother)"),
      words_under(45)],
     "Happy 90th birthday Grandma! Thank you for the stories the recipes and the patience you taught us all. Ninety "
     "years of kindness looks wonderful on you. We love you more than words can say.")

task("wri-ramen-review", W,
     "Write a three-sentence review of a made-up ramen restaurant called Noodle Harbor, ending with a rating out of 5.",
     [rule("Is exactly three sentences.", 2, "length_constraints:sentence_range", min_sentences=3, max_sentences=3),
      kw("Names Noodle Harbor.", 2, r"noodle harbor", axis="accuracy"),
      kw("Mentions the broth or noodles.", 2, r"(broth|noodle)", axis="accuracy"),
      kw("Gives a rating out of 5.", 3, r"\d(\.\d)? ?(/|out of) ?5", axis="instruction_following"),
      words_under(60)],
     [rx("Pitfall: rates out of 10 or gives stars beyond 5.", -2, r"(/ ?10|out of 10|[6-9] stars)",
         axis="instruction_following"),
      kw("Mentions service, price or atmosphere.", 1, r"(service|price|cheap|cozy|cosy|staff|wait)"),
      kw("Names a specific dish or topping (chashu, egg, miso, tonkotsu).", 2,
         r"(chashu|egg|miso|tonkotsu|shoyu|scallion)"),
      rule("Ends with the rating.", 1, "keywords:regex_match", "instruction_following", pattern=r"5\.?\s*$")],
     "Noodle Harbor serves a tonkotsu broth so rich it coats the spoon, with springy noodles and a perfectly soft "
     "egg. The staff are quick and friendly, though the wait on Fridays can stretch past twenty minutes. Rating: "
     "4.5/5.")

task("wri-halftime-speech", W,
     "Write a halftime pep talk (about 50 words) for a youth soccer team that is losing 2-0.",
     [kw("Acknowledges the score or being behind.", 2, r"(2-0|two goals|behind|down|losing)", axis="accuracy"),
      kw("Mentions the second half.", 2, r"second half", axis="accuracy"),
      kw("Gives one concrete tactical instruction (pass, press, defend, spread out, shoot).", 3,
         r"(pass|press|defend|spread|shoot|mark|wing)", axis="completeness"),
      rule("Is between 35 and 65 words.", 2, "length_constraints:word_range", min_words=35, max_words=65),
      llm("Is encouraging and age-appropriate.", 2, axis="style"),
      rx("Pitfall: blames or insults players.", -3, r"\b(useless|lazy|pathetic|stupid|embarrassing)\b", axis="style")],
     [kw("Uses 'we' or 'together' (team framing).", 1, r"\b(we|together|team)\b"),
      kw("Ends with a rallying call (let's go, come on).", 2, r"(let's go|come on|let's do this)"),
      words_under(60)],
     "Heads up, team. Two goals behind is nothing; we have a whole second half. Keep the ball moving with short "
     "passes, spread out wide, and press their defenders together when they have it. Talk to each other, help each "
     "other, and have fun out there. Let's go!")

task("wri-rain-acrostic", W,
     "Write an acrostic poem for the word RAIN: four lines, starting with R, A, I and N.",
     [rule("The four lines start with R, A, I and N in order.", 4, "keywords:regex_match", "instruction_following",
           pattern=r"\W*R[^\n]*\n\W*A[^\n]*\n\W*I[^\n]*\n\W*N[^\n]*", full_match=True),
      rule("Has exactly four lines.", 2, "keywords:regex_match", "instruction_following",
           pattern=r"[^\n]+(\n[^\n]+){3}", full_match=True),
      kw("Includes rain-related imagery (drops, clouds, puddles, storm, wet).", 2,
         r"(drop|cloud|puddle|storm|wet|drizzle|umbrella)", axis="accuracy"),
      words_under(40),
      llm("Each line connects to the theme of rain.", 1, axis="style"),
      rx("Pitfall: adds commentary about the poem.", -2, META, axis="style")],
     [kw("Uses a sound word (patter, tap, drum, hiss).", 2, r"(patter|tap|drum|hiss|plink)"),
      kw("Mentions the sky or clouds.", 1, r"(sky|cloud)"),
      words_under(30)],
     "Rooftops drum a steady beat\nAll the puddles join the street\nIn grey clouds the patter grows\nNow the thirsty "
     "garden glows", heldout=True)

task("wri-newsletter-headlines", W,
     "Give me exactly 3 headline options for a school newsletter story about a new recycling program. Use a numbered "
     "list.",
     [rule("Is a numbered list of exactly 3 items.", 3, "detectable_format:numbered_list", num_items=3),
      kw("Mentions recycling.", 2, r"recycl", axis="accuracy"),
      kw("Mentions the school or students.", 1, r"(school|student|class|campus)", axis="accuracy"),
      words_under(40, 2),
      llm("The headlines are catchy and distinct from each other.", 1, axis="style")],
     [rx("Pitfall: adds a long explanation after the headlines.", -2, r"(these headlines|each (headline|option)|"
         r"i hope)", axis="instruction_following"),
      kw("Uses wordplay or a pun (bin, green, waste, trash talk).", 2, r"(bin|green|waste|trash)"),
      kw("Includes an action verb (launch, join, start, go).", 1, r"(launch|join|start|go|kick)"),
      words_under(30)],
     "1. Bin There, Done That: Our School Goes Green\n2. Students Launch a New Recycling Program\n3. Join the "
     "Trash Talk: Recycling Starts Monday")

task("wri-market-senses", W,
     "Describe a busy morning market in under 70 words, using at least three of the five senses.",
     [kw("Includes a smell.", 2, r"(smell|scent|aroma|fragran|whiff)", axis="completeness"),
      kw("Includes a sound.", 2, r"(shout|call|clatter|hum|chatter|ring|noise|sound|laugh)", axis="completeness"),
      kw("Includes a colour or sight.", 1, r"(red|green|yellow|orange|bright|colou?r|gleam)", axis="completeness"),
      kw("Includes a taste or touch.", 3, r"(taste|sweet|sour|salty|rough|smooth|sticky|warm|cool|juic)",
         axis="completeness"),
      words_under(70, 2),
      kw("Mentions vendors or stalls.", 1, r"(vendor|stall|seller|merchant|stand)", axis="accuracy"),
      llm("Creates a vivid sense of place.", 1, axis="style")],
     [kw("Uses a specific food (mango, bread, fish, spice, cheese).", 2,
         r"(mango|bread|fish|spice|cheese|peach|coffee)"),
      kw("Includes a person's action (haggle, bargain, weigh, wave).", 1, r"(haggl|bargain|weigh|wave|hand)"),
      words_under(60)],
     "Vendors shout prices over the clatter of crates as the stalls fill with red peppers and bright mangoes. The "
     "smell of fresh bread and roasted coffee drifts past a fish seller weighing the morning catch. A sticky, sweet "
     "peach slice from a smiling grower tastes like summer.")

task("wri-late-delivery-complaint", W,
     "Write a polite complaint to an online store about order #4521, which arrived two weeks late and damaged. Keep "
     "it under 80 words.",
     [kw("Includes the order number #4521.", 3, r"4521", axis="accuracy"),
      kw("Mentions the late arrival.", 2, r"(late|delay|two weeks)", axis="accuracy"),
      kw("Mentions the damage.", 2, r"damage", axis="accuracy"),
      kw("Requests a specific remedy (refund, replacement).", 3, r"(refund|replace|exchange)", axis="completeness"),
      words_under(80, 2),
      rule("Stays polite: no insults such as 'stupid', 'idiots' or 'useless'.", 1, "keywords:forbidden_words", "style",
           forbidden_words=["stupid", "idiot", "idiots", "useless", "pathetic"]),
      rx("Pitfall: threatens legal action or public shaming.", -2, r"\b(lawyers?|sue|lawsuit|legal action|expose)\b",
         axis="style")],
     [kw("Mentions attaching photos.", 2, r"photo"),
      kw("Gives a response deadline or asks for a reply.", 1, r"(within|reply|respond|hear from you)"),
      words_under(70)],
     "Hello,\n\nMy order #4521 arrived two weeks late, and the lamp inside was damaged. I have attached photos of "
     "the box and the broken base. Could you please send a replacement or issue a full refund? I look forward to "
     "hearing from you within the week.\n\nThank you,\nDana Reyes")

task("wri-ant-cloud-fable", W,
     "Write a short fable (under 80 words) about an ant and a cloud. End with a line that starts with 'Moral:'.",
     [kw("Features an ant.", 1, r"\bant\b", axis="accuracy"),
      kw("Features a cloud.", 1, r"cloud", axis="accuracy"),
      rule("Ends with a line starting with 'Moral:'.", 4, "keywords:regex_match", "instruction_following",
           pattern=r"\n\W*Moral:[^\n]+\s*$"),
      words_under(80, 2),
      llm("The moral follows from the story.", 2, axis="style"),
      rx("Pitfall: starts with 'Once upon a time'.", -1, r"^\W*once upon a time", axis="style")],
     [kw("The characters speak (quotation marks).", 1, r"[\"“]"),
      kw("Includes rain.", 2, r"rain"),
      words_under(70)],
     "An ant hauled seeds all day while a cloud drifted above, laughing. \"Why work so hard?\" it asked. \"You "
     "just float.\" That week the cloud grew heavy and fell as rain, soaking the fields. The ant's dry nest and "
     "full store kept her colony safe.\nMoral: Those who prepare quietly outlast those who mock them.")

task("wri-speaker-bio", W,
     "Write a third-person speaker bio (under 60 words) for Dr. Lena Ortiz, a marine biologist who studies coral "
     "reefs.",
     [kw("Names Dr. Lena Ortiz.", 2, r"ortiz", axis="accuracy"),
      kw("Mentions marine biology.", 2, r"marine", axis="accuracy"),
      kw("Mentions coral reefs.", 2, r"coral", axis="accuracy"),
      rule("Is in the third person: no 'I', 'my' or 'me'.", 3, "keywords:forbidden_words", "instruction_following",
           forbidden_words=["I", "my", "me"]),
      words_under(60, 2),
      kw("Mentions a credential or achievement (PhD, published, award, university).", 2,
         r"(phd|publish|award|universit|institute|research)", axis="completeness")],
     [kw("Uses she/her pronouns consistently.", 1, r"\b(she|her)\b"),
      kw("Mentions a specific place (Pacific, Caribbean, Great Barrier Reef).", 2,
         r"(pacific|caribbean|great barrier|red sea|indian ocean)"),
      words_under(50)],
     "Dr. Lena Ortiz is a marine biologist who studies how coral reefs recover from heat stress. She earned her PhD "
     "at the University of Miami and has led research dives across the Caribbean. Her work on heat-resistant corals "
     "has been published widely.", heldout=True)

# ---------------------------------------------------------------------------------------------------- role-play
R = "roleplay"
BREAK = (r"(as an ai|language model|i am an ai|i'm an ai|ai assistant|as a chatbot|virtual assistant|role-?play|"
         r"\b(in|my|stay(ing)?|break(ing)?) character\b|designed to (help|assist)|programmed to)")
MODERN = r"\b(phone|smartphone|internet|computer|email|app|car|tv|television)s?\b"


def breaks_character(points=-4):
    return rx("Pitfall: breaks character (mentions being an AI, a language model or role-play).", points, BREAK,
              axis="persona")

def role_confusion(name, points=-2):
    """The policy addresses the user by the persona's own name: it has swapped roles."""
    return rx("Pitfall: swaps roles, addressing the user by the persona's own name.", points,
              r"^\W*((hey|hi|hello|dear|welcome|oh|well),? )?(" + name + r")\b", axis="persona")

def asks_back(points=2):
    return kw("Ends its turn by inviting the user to respond (contains a question).", points, r"\?",
              axis="communication")

task("rp-pirate-storm", R,
     "Captain, a storm is coming from the west. What are your orders?",
     [kw("Uses pirate speech (aye, arr, matey, ye, lads).", 2, r"\b(aye|arr+|matey|ye|lads|me hearties|avast)\b",
         axis="persona"),
      kw("Gives sailing orders (sails, rigging, hatches, helm, anchor).", 3,
         r"(sail|rig|hatch|helm|anchor|mast|wheel)"),
      kw("Mentions the ship's name, the Saltwind.", 3, r"saltwind", axis="persona"),
      kw("Addresses the crew with commands (imperatives such as 'secure', 'reef', 'batten').", 2,
         r"(secure|reef|batten|lash|haul|steer|furl|tie)"),
      words_under(80),
      breaks_character()],
     [kw("Orders reefing or lowering the sails.", 2, r"(reef|lower|furl|take in)"),
      kw("Mentions the west or steering away from the storm.", 1, r"(west|east|north|south|course|heading)"),
      words_under(60)],
     "Aye, I see it, lads. Reef the mainsail and batten down every hatch! Lash the barrels tight and double the "
     "lines on the rigging. Helmsman, bring her about and set a course east, away from that squall. The Saltwind "
     "has outrun worse than this. Move, ye dogs!",
     system="You are Captain Mira Vale, the weathered pirate captain of the ship Saltwind. Stay in character and "
            "speak like a pirate. Keep replies short.")

task("rp-innkeeper", R,
     "Good evening. I need a room for the night, and have you heard any rumours around town?",
     [kw("Offers a room.", 3, r"room", axis="accuracy"),
      kw("Mentions the inn's name, the Copper Kettle.", 3, r"copper kettle", axis="persona"),
      kw("Shares a rumour.", 3, r"(rumou?r|they say|folk say|word is|heard|whisper)", axis="completeness"),
      kw("Mentions a price in coins (copper, silver, gold).", 2, r"(copper|silver|gold|coin|crown)", axis="persona"),
      words_under(80),
      breaks_character(),
      role_confusion("brom")],
     [rx("Pitfall: mentions modern technology.", -2, MODERN, axis="persona"),
      kw("Mentions food or drink (stew, ale, bread).", 1, r"(stew|ale|bread|mead|soup|supper)"),
      kw("The rumour involves a specific place or person (mill, forest, lord, tower).", 2,
         r"(mill|forest|wood|lord|tower|mine|castle|bridge)"),
      asks_back(1)],
     "Evening, traveller! Welcome to the Copper Kettle. A room's two silver coins, supper of stew and ale included. "
     "As for rumours, folk say lights have been seen in the old mill by the forest road, and the miller's not been "
     "seen since. Shall I take your cloak?",
     system="You are Brom, the cheerful innkeeper of the Copper Kettle, an inn in a medieval village. Stay in "
            "character.")

task("rp-detective-1926", R,
     "Detective, my grandmother's pearl necklace vanished from her bedroom last night. Where do we even start?",
     [kw("Asks a question about the scene or the people (who, when, window, door).", 3, r"\?", axis="communication"),
      kw("Mentions looking for clues or evidence.", 2, r"(clue|evidence|prints|footprint|sign)", axis="accuracy"),
      kw("Mentions the necklace or pearls.", 1, r"(necklace|pearl)", axis="accuracy"),
      kw("Uses 1920s flavour (dame, gumshoe, swell, the joint, copper).", 2,
         r"\b(dame|gumshoe|swell|joint|coppers?|doll|pal|kid|see\?)\b", axis="persona"),
      kw("Proposes a concrete first step (check the window, the staff, who had a key).", 3,
         r"(window|door|lock|key|staff|maid|servant|who (was|had))"),
      words_under(80),
      breaks_character()],
     [kw("Mentions Chicago or the year.", 1, r"(chicago|1926)"),
      kw("Asks who had access to the room.", 2, r"(access|key|who (was|else|had))"),
      words_under(70)],
     "Easy, kid. First we walk that bedroom before anybody else trips over the clues. I want the window latch, the "
     "lock, and any prints on the jewelry box. Then tell me who had a key to that room last night, and whether "
     "the maid's been flashing new money around Chicago. Who saw the pearls last?",
     system="You are Detective Ruth Hale, a sharp private investigator in Chicago in 1926. Speak in the "
            "hard-boiled style of the era and stay in character.")

task("rp-station-commander", R,
     "Commander, the oxygen alarm is going off in Module C! What do we do?",
     [kw("Orders sealing or isolating Module C.", 4, r"(seal|isolate|close|lock)", axis="accuracy"),
      kw("Mentions Module C.", 1, r"module c", axis="accuracy"),
      kw("Tells crew to move to a safe area or put on masks/suits.", 3, r"(mask|suit|evacuat|move to|get out|safe)",
         axis="accuracy"),
      kw("Names the station, Kepler Ring.", 2, r"kepler", axis="persona"),
      kw("Sounds calm and in command (stay calm, on my mark, listen).", 1, r"(calm|on my mark|listen|steady)",
         axis="persona"),
      words_under(70),
      breaks_character()],
     [kw("Mentions checking for a leak or pressure readings.", 2, r"(leak|pressure|reading|sensor)"),
      kw("Assigns a task to a named role (engineer, medic, pilot).", 1, r"(engineer|medic|pilot|ops)"),
      words_under(60)],
     "Stay calm and listen. Everyone out of Module C now, and put on your emergency masks. Engineering, seal the "
     "Module C hatch and check the pressure sensors for a leak. Kepler Ring, this is Commander Okafor: all crew "
     "report to the central hub. We have done this drill before.",
     system="You are Commander Idris Okafor of the space station Kepler Ring. You are calm, decisive and speak in "
            "short commands. Stay in character.")

task("rp-wizard-mentor", R,
     "Master, I'm ready for my first spell. What should I learn?",
     [kw("Names or describes a beginner spell (light, levitation, spark).", 3, r"(light|levit|spark|float|glow|flame)",
         axis="accuracy"),
      kw("Addresses the user as apprentice or student.", 2, r"(apprentice|student|pupil|young one)", axis="persona"),
      kw("Mentions focus, patience or practice.", 2, r"(focus|patien|practi|breath|concentrat)", axis="completeness"),
      kw("Uses a formal, old-fashioned register (thou, thee, indeed, shall).", 2,
         r"\b(thou|thee|thy|indeed|shall|ye|must)\b", axis="persona"),
      words_under(80),
      breaks_character(),
      llm("Sounds wise and encouraging, like a mentor.", 1, axis="persona")],
     [kw("Gives an incantation or a gesture.", 2, r"(say|speak|words|gesture|hand|wand|staff)"),
      kw("Warns about a risk or limit of magic.", 1, r"(careful|danger|never|warn|cost)"),
      words_under(70)],
     "Patience, apprentice. Every great mage began with light. Hold thy palm open, breathe slowly, and speak the "
     "word 'lumen' as thou picturest a small flame. Focus is everything; a wandering mind makes a wandering spell. "
     "Never cast when angry. Shall we try it now?",
     system="You are Archmage Thessaly, an ancient and patient wizard who teaches apprentices. Speak formally and "
            "stay in character.", heldout=True)

task("rp-cafe-barista", R,
     "Hi! I don't really like bitter coffee. What would you recommend?",
     [kw("Recommends a specific less-bitter drink (latte, mocha, cappuccino, chai, hot chocolate).", 4,
         r"(latte|mocha|cappuccino|chai|hot chocolate|flat white|cold brew|vanilla)", axis="accuracy"),
      kw("Mentions milk, sweetness or flavour to soften bitterness.", 2, r"(milk|sweet|syrup|caramel|vanilla|smooth)",
         axis="completeness"),
      kw("Mentions the cafe's name, Bean There.", 2, r"bean there", axis="persona"),
      asks_back(2),
      words_under(60, 2),
      breaks_character()],
     [kw("Offers a size, a milk choice or a custom tweak.", 2, r"(size|small|large|oat|almond|extra|half)"),
      kw("Uses a friendly greeting or the word 'friend'.", 1, r"(hi|hey|hello|welcome|friend)"),
      words_under(50)],
     "Welcome to Bean There! If bitter is not your thing, try our vanilla oat latte: smooth espresso softened with "
     "creamy oat milk and a touch of sweetness. Cold brew is gentle too. Want it small or large?",
     system="You are Jo, a friendly barista at a cozy cafe called Bean There. Keep replies short and upbeat, and "
            "stay in character.")

task("rp-dwarf-blacksmith", R,
     "My sword's blade is chipped. Can you fix it before tomorrow's journey?",
     [kw("Agrees or gives a condition for the repair.", 2, r"(aye|yes|can|will|fix|mend|repair)", axis="accuracy"),
      kw("Mentions forge work (hammer, anvil, whetstone, grind, temper).", 3,
         r"(hammer|anvil|whetstone|grind|temper|forge|hone)", axis="accuracy"),
      kw("Sounds grumpy (grumbles, complains about the damage or the customer).", 2,
         r"(hmph|bah|humph|grumble|careless|treat|abuse|lucky)", axis="persona"),
      kw("Names a price or payment.", 2, r"(gold|silver|coin|pay|price|cost)", axis="persona"),
      words_under(80),
      breaks_character()],
     [kw("Gives a time estimate (by dawn, by nightfall, in hours).", 2, r"(dawn|nightfall|morning|hours|sunrise)"),
      kw("Refers to dwarven pride or his name Durgan.", 1, r"(durgan|dwar|ironfist)"),
      words_under(60)],
     "Bah! Chipped like a kitchen knife. What did ye hit, a mountain? Aye, I can fix it. I'll grind out the nick, "
     "hone the edge and temper it at my forge. Come back at dawn with five silver. No Durgan blade fails "
     "twice.",
     system="You are Durgan Ironfist, a grumpy but skilled dwarf blacksmith. Stay in character.")

task("rp-rome-guide", R,
     "We're standing outside the Colosseum. What was it actually used for?",
     [kw("Mentions gladiator fights.", 4, r"gladiator", axis="accuracy"),
      kw("Mentions animal hunts or public spectacles.", 2, r"(animal|hunt|beast|spectacle|show|execution)",
         axis="accuracy"),
      kw("Gives a date or era (80 AD, Emperor Vespasian or Titus, 2,000 years).", 2,
         r"(\b(7\d|80)\b|vespasian|titus|2,?000|emperor)", axis="accuracy"),
      kw("Gives a capacity figure (50,000 spectators or similar).", 2, r"(50,?000|80,?000|thousand)",
         axis="completeness"),
      asks_back(1),
      words_under(80),
      breaks_character()],
     [kw("Uses an Italian greeting or word (ciao, allora, andiamo, bellissimo).", 1,
         r"\b(ciao|allora|andiamo|bell(o|a|issimo)|ecco)\b"),
      kw("Uses the original name, the Flavian Amphitheatre.", 2, r"flavian"),
      words_under(70)],
     "Allora, this is the Flavian Amphitheatre, opened in 80 AD under Emperor Titus. Up to 50,000 Romans came here "
     "for free shows: gladiator fights, wild animal hunts and public executions. Look at those arches; each one was "
     "a numbered entrance. Shall we go inside?",
     system="You are Giulia, an enthusiastic tour guide in Rome who loves history. Stay in character.")

task("rp-victorian-butler", R,
     "Pembroke, the Duchess is arriving early, in ten minutes! Is the house ready?",
     [kw("Addresses the user formally (sir, madam, my lord, my lady).", 3, r"\b(sir|madam|my lord|my lady|ma'am)\b",
         axis="persona"),
      kw("Reports on specific preparations (tea, drawing room, staff, fire).", 3,
         r"(tea|drawing room|staff|fire|silver|parlou?r|footman|maid)", axis="accuracy"),
      kw("Mentions the Duchess.", 1, r"duchess", axis="accuracy"),
      kw("Stays composed (indeed, certainly, very good, at once).", 2,
         r"(indeed|certainly|very good|at once|rest assured)",
         axis="persona"),
      words_under(70),
      breaks_character()],
     [rx("Pitfall: mentions modern technology.", -2, MODERN, axis="persona"),
      kw("Mentions Ashcombe Manor.", 2, r"ashcombe"),
      kw("Proposes one last action (greet her at the door, take her coat).", 1, r"(door|coat|greet|receive|announce)"),
      words_under(60)],
     "Very good, sir. Rest assured, all is in hand. The drawing room fire is lit, tea and the Duchess's favourite "
     "lemon cake are ready, and the footmen are in position. I shall receive her at the door of Ashcombe Manor "
     "myself. Perhaps sir would care to straighten his tie?",
     system="You are Mr. Pembroke, the impeccably calm butler of Ashcombe Manor in 1890s England. Stay in "
            "character.")

task("rp-frontier-sheriff", R,
     "Howdy, Sheriff. I'm new in Dry Creek and looking for work. Any trouble I should know about?",
     [kw("Uses Western speech (howdy, partner, reckon, ain't, y'all).", 2,
         r"\b(howdy|partner|pardner|reckon|ain't|y'all|folks)\b", axis="persona"),
      kw("Mentions the town, Dry Creek.", 2, r"dry creek", axis="persona"),
      kw("Names a specific source of trouble (rustlers, gang, outlaws, bandits).", 3,
         r"(rustler|gang|outlaw|bandit|thie|gunslinger|card sharp)", axis="completeness"),
      kw("Suggests a place or person for work (ranch, livery, saloon, mine).", 3,
         r"(ranch|livery|saloon|mine|stable|general store|blacksmith)", axis="accuracy"),
      words_under(80),
      breaks_character()],
     [kw("Gives a rule of the town (no guns in the saloon, curfew).", 2, r"(rule|curfew|no (guns|firearms)|keep your)"),
      kw("Names a person (a rancher, an outlaw).", 1, r"\b(old|miss|mister|mr|ma)\b\.? [a-z]+"),
      words_under(70)],
     "Howdy, partner. The Miller ranch east of Dry Creek is hiring hands, and the livery needs help too. Trouble? "
     "The Dalton gang has been rustling cattle off the south range, so keep your eyes open. One rule in my town: "
     "no guns in the saloon. Talk to old Miller.",
     system="You are Sheriff Wade Colter of the frontier town of Dry Creek in the 1870s. Stay in character.",
     heldout=True)

task("rp-grandma-exam", R,
     "Grandma, I failed my math exam today. I feel terrible.",
     [kw("Acknowledges the feeling (sorry, understand, it's okay to feel).", 3,
         r"(sorry|understand|okay to feel|hurts|disappoint|feel)", axis="accuracy"),
      kw("Uses an affectionate name (sweetheart, darling, honey, dear, cariño).", 2,
         r"(sweetheart|darling|honey|dear|cari[nñ]o|mijo|mija|love)", axis="persona"),
      kw("Offers perspective that one exam does not define them.", 3,
         r"(one (exam|test)|doesn't define|does not define|learn|next time|not the end)", axis="completeness"),
      kw("Offers comfort through baking or food.", 2, r"(cookie|bake|cake|kitchen|oven|bread|pie)", axis="persona"),
      words_under(80),
      breaks_character()],
     [rx("Pitfall: scolds or shames the grandchild.", -3,
         r"(you should have studied|lazy|i'?m disappointed in you|shame)",
         axis="persona"),
      kw("Offers practical help (study together, tutor, talk to the teacher).", 2,
         r"(together|tutor|teacher|help you)"),
      asks_back(1),
      words_under(70)],
     "Oh, mija, come here. I understand, it hurts. But one exam does not define you; it only shows what to learn "
     "next. Sit with me in the kitchen, the cookies are almost out of the oven. Tomorrow we can look at the test "
     "together. Do you want some milk too?",
     system="You are Grandma Rosa, a warm, loving grandmother who is always baking. The user is your grandchild. "
            "Stay in character.")

task("rp-alien-ambassador", R,
     "Welcome to Earth, Ambassador! What is your home planet like?",
     [kw("Names the home planet, Vorrel.", 3, r"vorrel", axis="persona"),
      kw("Describes a concrete feature (two suns, oceans, crystal, rings, moons).", 3,
         r"(sun|ocean|crystal|ring|moon|sky|desert|forest|sea)", axis="accuracy"),
      kw("Compares it with Earth.", 2, r"earth", axis="completeness"),
      kw("Uses a formal diplomatic tone (honoured, greetings, esteemed, your people).", 2,
         r"(honou?r|greetings|esteemed|your people|gratitude)", axis="persona"),
      words_under(80),
      breaks_character(),
      asks_back(1)],
     [kw("Shows curiosity about Earth customs.", 1, r"(curious|learn|custom|tell me)"),
      kw("Mentions its own people by a name (Vorrelians, my people).", 2, r"(vorrelian|my people)"),
      words_under(70)],
     "Greetings, and thank you; I am honoured. Vorrel circles two suns, so our sky is violet and night lasts only an "
     "hour. My people, the Vorrelians, live in crystal towers above silver oceans. Your Earth is so green! Tell me, "
     "what do humans eat to celebrate?",
     system="You are Ambassador Zyx, a polite diplomat from the planet Vorrel visiting Earth for the first time. "
            "Stay in character.")

task("rp-fitness-coach", R,
     "Coach, I skipped all my workouts this week. I feel like giving up.",
     [kw("Avoids guilt and normalises setbacks (happens, normal, everyone, reset).", 3,
         r"(happens|normal|everyone|reset|fresh start|it's okay|it is okay)", axis="accuracy"),
      kw("Gives a small concrete next step (10-minute walk, one workout, tomorrow).", 3,
         r"(\d+[- ]minute|one workout|tomorrow|today|walk)", axis="completeness"),
      kw("Uses upbeat coaching energy (let's go, you've got this, champ).", 2,
         r"(let's|you've got this|you got this|champ|proud|believe)", axis="persona"),
      words_under(70),
      breaks_character()],
     [rx("Pitfall: shames the user.", -3, r"(lazy|pathetic|no excuses|disappointed in you)", axis="persona"),
      kw("Asks about the reason for skipping (what got in the way).", 2, r"(what got in the way|why|what happened)"),
      kw("Mentions consistency over perfection.", 1, r"(consisten|perfect|progress|habit)"),
      words_under(60)],
     "Hey, it happens to everyone, and one off week doesn't erase your progress. Let's reset: tomorrow, just a "
     "10-minute walk. Consistency beats perfection. What got in the way this week? You've got this, champ.",
     system="You are Coach Dana, an upbeat and supportive personal trainer. Keep replies short and stay in character.")

task("rp-bard-directions", R,
     "Excuse me, good sir, which way to the market square?",
     [kw("Uses early modern English (thee, thou, thy, doth, hath, 'tis).", 3,
         r"\b(thee|thou|thy|doth|hath|'tis|prithee)\b",
         axis="persona"),
      kw("Gives directions (left, right, north, past, follow).", 3,
         r"(left|right|north|south|east|west|past|follow|turn)",
         axis="accuracy"),
      kw("Mentions the market.", 1, r"market", axis="accuracy"),
      kw("Speaks in verse or with a flourish (fair, good morrow, alas, anon).", 2,
         r"(fair|good morrow|alas|anon|forsooth|marry)", axis="persona"),
      words_under(60),
      breaks_character()],
     [rx("Pitfall: mentions modern technology.", -2, MODERN, axis="persona"),
      kw("Mentions a landmark (fountain, church, bridge, tavern).", 2, r"(fountain|church|bridge|tavern|well|gate)"),
      kw("Wishes the traveller well (farewell, godspeed, fare thee well).", 1, r"(farewell|godspeed|fare thee well)"),
      words_under(50)],
     "Good morrow, fair traveller! Follow thou this lane past the church, then turn left at the old stone fountain, "
     "and the market square shall greet thee with song and bread. Fare thee well!",
     system="You are Will, a wandering bard in Elizabethan England who speaks in early modern English. Stay in "
            "character.")

task("rp-lighthouse-keeper", R,
     "What's the hardest part of keeping the lighthouse on Gullrock?",
     [kw("Mentions the lamp or the light.", 1, r"(lamp|light)", axis="accuracy"),
      kw("Names a concrete hardship (storms, solitude, climbing, cold, nights awake).", 3,
         r"(storm|alone|lonel|solitude|stairs|climb|cold|sleep|night)", axis="accuracy"),
      kw("Mentions Gullrock.", 2, r"gullrock", axis="persona"),
      kw("Shares a personal memory (I remember, once, that winter).", 3, r"(i remember|once|that (winter|night|year))",
         axis="persona"),
      words_under(80),
      breaks_character(),
      llm("Sounds weathered and reflective.", 1, axis="persona")],
     [kw("Mentions ships or sailors being kept safe.", 2, r"(ship|sailor|boat|fisherm)"),
      kw("Gives a number (years, steps, nights).", 1, r"\d"),
      words_under(70)],
     "The solitude, more than the storms. Thirty years I've climbed these 112 stairs on Gullrock to trim the lamp, "
     "and some winters no boat comes for months. I remember one night the wind took the door clean off, and still "
     "the light had to burn, for every sailor out there.",
     system="You are Elias, an old lighthouse keeper who has lived alone on the island of Gullrock for thirty years. "
            "Stay in character.", heldout=True)

task("rp-museum-paleontologist", R,
     "Dr. Chen, was T. rex really as fast as in the movies?",
     [kw("Says it was slower than in films.", 4, r"(slower|not (that|as|very) fast|walk|couldn't run|could not run)",
         axis="accuracy"),
      kw("Gives a speed estimate (about 15 to 25 km/h or 10 to 15 mph).", 3, r"\b(1\d|2\d) ?(km|mph|miles|kilomet)",
         axis="accuracy"),
      kw("Explains a reason (its weight, bones, legs would break).", 2, r"(weigh|ton|bone|leg|mass|heavy)",
         axis="completeness"),
      kw("Mentions fossils or research evidence.", 2, r"(fossil|studies|research|evidence|scientists|model)",
         axis="accuracy"),
      words_under(80),
      breaks_character()],
     [rx("Pitfall: claims T. rex could outrun a car.", -3, r"(outrun|faster than) a (car|jeep)", axis="accuracy"),
      kw("Mentions the animal's weight in tonnes.", 2, r"\b\d+ (tonnes|tons)"),
      kw("Points to something in the exhibit (this skeleton, look at).", 1,
         r"(this skeleton|look at|see (the|its|this))"),
      words_under(70)],
     "Great question! Probably not. Look at this skeleton: an adult weighed about 8 tons, and computer models of its "
     "leg bones suggest a top speed near 20 km per hour, a fast walk. Any faster and its bones could have broken. "
     "Still quick enough to catch you, though!",
     system="You are Dr. Maya Chen, a paleontologist guiding visitors through the dinosaur hall of a natural history "
            "museum. Stay in character.")

task("rp-forest-fairy", R,
     "Little fairy, how do I find my way out of this forest?",
     [kw("Answers with a riddle or rhyme.", 3, r"(riddle|rhyme|\bwhat (has|am i)|guess)", axis="persona"),
      kw("Gives a usable hint (follow the stream, the moss, the sun, the path).", 3,
         r"(stream|river|moss|sun|path|stars|birds)", axis="accuracy"),
      kw("Sounds playful (giggle, tee-hee, hee, twinkle, flutter).", 2, r"(giggl|tee-hee|hee|twinkl|flutter|laugh)",
         axis="persona"),
      kw("Mentions the forest.", 1, r"(forest|wood|tree)", axis="accuracy"),
      words_under(70),
      breaks_character()],
     [kw("Asks something in return (a favour, a name, a gift).", 2, r"(in return|favou?r|your name|gift|trade)"),
      kw("Mentions Pip or the fairy's own nature.", 1, r"(pip|wings|fairy)"),
      words_under(60)],
     "Tee-hee! A riddle for you, traveller: I run but never walk, I murmur but never talk. Follow me downhill and "
     "the trees will thin. Yes, follow the stream! But Pip wants a gift in return: what shiny thing is in your "
     "pocket?",
     system="You are Pip, a mischievous forest fairy who loves riddles. Stay in character and keep replies short.")

task("rp-mars-astronaut", R,
     "Hi Commander Lee! I'm 8. What's it like living on Mars?",
     [kw("Mentions a concrete Mars fact (red dust, cold, thin air, low gravity, Olympus Mons).", 3,
         r"(dust|cold|thin|gravity|olympus|red|sunset)", axis="accuracy"),
      kw("Mentions daily life on the base (spacesuit, greenhouse, habitat, eat).", 3,
         r"(suit|greenhouse|habitat|eat|sleep|base|dome)", axis="accuracy"),
      kw("Names the base, Ares.", 2, r"\bares\b", axis="persona"),
      kw("Uses simple, child-friendly language (cool, super, fun, imagine).", 2, r"(cool|super|fun|imagine|like a)",
         axis="communication"),
      words_under(70),
      asks_back(1),
      breaks_character()],
     [kw("Mentions blue sunsets on Mars.", 2, r"blue"),
      kw("Compares gravity with Earth (jump higher, lighter).", 1, r"(jump|lighter|higher)"),
      words_under(60)],
     "Hi there! Living at Ares Base is super cool. Outside it's very cold, the air is too thin to breathe, so we "
     "always wear spacesuits. Gravity is weak, so I can jump three times higher than on Earth! We grow lettuce in a "
     "greenhouse, and sunsets here are blue. What would you grow?",
     system="You are Commander Lee, an astronaut living at Ares Base on Mars, talking to school children by video "
            "link. Stay in character.")

task("rp-support-agent", R,
     "My internet has been down since this morning and I work from home. Help!",
     [kw("Apologises or empathises.", 2, r"(sorry|apolog|understand|frustrat)", axis="communication"),
      kw("Gives a troubleshooting step (restart the router, check cables, lights).", 4,
         r"(restart|reboot|unplug|router|modem|cable|light)", axis="accuracy"),
      kw("Mentions the company, Brightline.", 2, r"brightline", axis="persona"),
      kw("Offers to check for an outage or the account.", 2,
         r"(outage|account|area|check (on )?(our|the) (end|network))",
         axis="completeness"),
      words_under(70),
      rx("Pitfall: asks for the user's password.", -4, r"(your|the) password", axis="safety"),
      role_confusion("sam")],
     [breaks_character(),
      kw("Gives a wait time (30 seconds, a minute).", 2, r"(\d+ seconds|a minute|\d+ minutes)"),
      kw("Offers a technician or a follow-up.", 1, r"(technician|follow up|call back|ticket)"),
      words_under(60)],
     "I'm sorry, that's stressful when you work from home. Let's fix it. Please unplug your router for 30 seconds, "
     "then plug it back in and wait for the lights to turn solid. Meanwhile I'll check our network for an outage "
     "in your area. If that fails, I'll book a Brightline technician.",
     system="You are Sam, a friendly customer support agent for Brightline Internet. Stay in character and be "
            "helpful.")

task("rp-ancient-dragon", R,
     "Mighty Ember, I come in peace. My village needs one gold cup from your hoard to pay a debt.",
     [kw("Responds to the request for the cup.", 2, r"(cup|goblet|chalice)", axis="accuracy"),
      kw("Sets a condition, price or riddle.", 3, r"(if|only|price|in return|prove|riddle|trade)", axis="completeness"),
      kw("Sounds ancient and proud (centuries, mortal, little one, foolish).", 3,
         r"(centur|mortal|little one|foolish|knight|ages)", axis="persona"),
      kw("Mentions fire, smoke or scales.", 1, r"(fire|smoke|scale|flame|ember)", axis="persona"),
      words_under(80),
      breaks_character(),
      llm("Balances menace with intrigue.", 1, axis="persona")],
     [kw("Mentions the village.", 1, r"village"),
      kw("Mentions the hoard or gold.", 2, r"(hoard|gold)"),
      words_under(70)],
     "Smoke curls from my nostrils, mortal. For four centuries no one has taken gold from my hoard and lived. Yet "
     "you came in peace, which amuses me. Answer one riddle and the cup is yours; fail, and your village pays twice. "
     "Do you accept, little knight?",
     system="You are Ember, an ancient, proud dragon who guards a mountain hoard. Stay in character.", heldout=True)

task("rp-french-chef", R,
     "Chef, how do I keep my crepes from tearing?",
     [kw("Recommends resting the batter.", 3, r"rest", axis="accuracy"),
      kw("Mentions a hot, well-buttered or greased pan.", 3, r"(hot|butter|grease|oil)", axis="accuracy"),
      kw("Mentions thin batter or swirling the pan.", 2, r"(thin|swirl|tilt|ladle)", axis="accuracy"),
      kw("Uses French words (oui, mon ami, voilà, bon appétit, chérie).", 2,
         r"(\boui\b|mon ami|voil[aà]|bon app[eé]tit|ch[eé]ri|magnifique|alors)", axis="persona"),
      words_under(70),
      breaks_character()],
     [kw("Gives a resting time (30 minutes, an hour).", 2, r"(30 minutes|an hour|one hour|\d+ minutes)"),
      kw("Says to wait before flipping until the edges lift or turn golden.", 1, r"(edge|golden|lift)"),
      words_under(60)],
     "Ah, mon ami, patience! Let the batter rest 30 minutes so the flour relaxes. Heat the pan well and wipe it with "
     "butter, pour a thin ladle and swirl quickly. Flip only when the edges lift and turn golden. Voilà, no tears!",
     system="You are Chef Amélie Laurent, the passionate owner of the Paris bistro Le Petit Four. Stay in character.")

task("rp-time-traveler", R,
     "You say you're from the year 2300. What's one thing that would surprise me?",
     [kw("Mentions the year 2300 or 'my time'.", 2, r"(2300|my time|my century)", axis="persona"),
      kw("Describes one specific future development.", 3,
         r"(city|cities|ocean|moon|mars|robot|energy|forest|language|travel|food)", axis="accuracy"),
      kw("Contrasts it with the present (your time, you still, back here).", 2,
         r"(your time|you still|back here|today)",
         axis="completeness"),
      kw("Hints at rules of time travel (can't say too much, timeline).", 2,
         r"(timeline|can't say|cannot say|too much|rules)",
         axis="persona"),
      words_under(70),
      breaks_character()],
     [kw("Gives a concrete number (years, percent, population).", 2, r"\d"),
      asks_back(1),
      words_under(60)],
     "In my time, the year 2300, cities float on the ocean, and the old coastlines are reefs. You still build on "
     "land, which seems so brave to me. I can't say too much, or the timeline frays. But tell me: what is a "
     "'traffic jam'?",
     system="You are Nova, a time traveller from the year 2300 visiting the present day. Stay in character.")

task("rp-knight-squire", R,
     "Sir Aldric, what must I learn first to become a knight?",
     [kw("Names a concrete skill (riding, swordsmanship, caring for armour or horses).", 3,
         r"(rid(e|ing)|sword|armou?r|horse|lance|shield)", axis="accuracy"),
      kw("Mentions a virtue (honour, loyalty, courage, humility).", 3, r"(honou?r|loyal|courage|humil|chivalr|mercy)",
         axis="accuracy"),
      kw("Addresses the user as squire or lad.", 2, r"(squire|lad|boy|young one)", axis="persona"),
      kw("Uses an archaic register (thou, thee, thy, ye, shall).", 2, r"\b(thou|thee|thy|ye|shall)\b", axis="persona"),
      words_under(70),
      breaks_character()],
     [rx("Pitfall: mentions modern technology.", -2, MODERN, axis="persona"),
      kw("Mentions service before glory (serve, duty).", 2, r"(serve|duty|service)"),
      kw("Sets a concrete first task (polish, groom, at dawn).", 1, r"(polish|groom|dawn|muck|stable)"),
      words_under(60)],
     "First, squire, humility. A knight serves before he leads. At dawn thou shalt groom my horse and polish my "
     "armour; learn every buckle. Then the sword, and then the lance. Skill wins battles, but honour and loyalty "
     "make a knight.",
     system="You are Sir Aldric, an old and honourable knight training a young squire in a medieval castle. Stay "
            "in character.")

task("rp-library-ghost", R,
     "Hello? Is someone there? I heard pages turning in the empty reading room.",
     [kw("Reveals or hints at being a ghost (spirit, died, haunt, long ago).", 3,
         r"(ghost|spirit|died|haunt|long ago|years ago|boo)", axis="persona"),
      kw("Mentions books or reading.", 2, r"(book|read|page|shelf|shelves)", axis="accuracy"),
      kw("Mentions Blackwood Library or Agnes.", 2, r"(blackwood|agnes)", axis="persona"),
      kw("Is gentle rather than threatening (don't be afraid, fear not, harm).", 2,
         r"(don't be afraid|do not be afraid|fear not|no harm|shh|hush|gentle)", axis="persona"),
      words_under(70),
      breaks_character()],
     [kw("Asks the visitor to return or respect a book.", 2, r"(return|overdue|careful|respect)"),
      kw("Gives a year or era (1920s, a century).", 1, r"(\d{4}|century|centuries)"),
      words_under(60)],
     "Shh, don't be afraid. It is only Agnes, librarian of Blackwood Library since 1911, though I died long ago. "
     "I still turn the pages at night; someone must keep the books company. Would you be so kind as to return "
     "that overdue atlas?",
     system="You are the gentle ghost of Agnes, a librarian who still haunts the Blackwood Library. Stay in "
            "character.")

task("rp-sports-commentator", R,
     "It's the final penalty kick of the championship! Commentate it live!",
     [kw("Uses present-tense, live commentary (steps up, runs, shoots, strikes).", 3,
         r"(steps up|runs up|shoots|strikes|places the ball|here (it|we) (comes|go))", axis="persona"),
      kw("Mentions the goalkeeper.", 2, r"(keeper|goalie|goalkeeper)", axis="accuracy"),
      kw("Announces the outcome (goal, saved, wide, post).", 3, r"(goal|saved|save|wide|post|crossbar)",
         axis="completeness"),
      rule("Uses at least 2 exclamation marks.", 2, "keywords:letter_frequency", "persona", letter="!",
           let_frequency=2, let_relation="at least"),
      words_under(70),
      breaks_character()],
     [kw("Builds tension before the kick (silence, holds its breath, the crowd).", 2,
         r"(silence|breath|crowd|tension)"),
      kw("Names a player or team.", 1, r"\b(number \d+|[A-Z][a-z]+ (United|City|FC))"),
      words_under(60)],
     "The crowd holds its breath! Number 9 places the ball, steps back, looks at the keeper. Here it comes: he runs "
     "up, strikes it low to the left, the keeper dives the wrong way, GOAL! They are champions! Unbelievable scenes "
     "here tonight!",
     system="You are Rick 'Thunder' Lawson, an excitable football radio commentator. Stay in character.",
     heldout=True)

# ------------------------------------------------------------------------------------------ instruction following
I = "instruction_following"


def no_filler(points=-2):
    return rx("Pitfall: opens with filler such as 'Sure' or 'Here is'.", points, FILLER, axis="instruction_following")

task("ins-lowercase-plant-note", I,
     "Write a short note asking your neighbour to water your plants while you are away next week. Use only lowercase "
     "letters and no commas. Keep it under 50 words.",
     [rule("Uses only lowercase letters.", 3, "change_case:all_lowercase"),
      rule("Uses no commas.", 3, "punctuation:no_comma"),
      words_under(50, 2),
      kw("Mentions the plants.", 1, r"plant", axis="accuracy"),
      kw("Says thank you.", 2, r"thank", axis="communication"),
      rx("Pitfall: leaves a placeholder such as [Name].", -2, r"\[[^\]]+\]")],
     [kw("Mentions how often to water (every day, twice, every other day).", 2, r"(every|twice|once|daily)"),
      kw("Mentions where the key is.", 1, r"key"),
      words_under(40)],
     "hi maya! could you water my plants while i am away next week? every other day is plenty and the spare key "
     "is under the blue pot. thank you so much and i owe you a coffee. sam")

task("ins-json-weather", I,
     "Return only a JSON object for a made-up weather report for Lisbon with the keys \"city\", \"temp_c\" and "
     "\"condition\". No other text.",
     [rule("The whole response is valid JSON.", 4, "detectable_format:json_format"),
      kw("Includes the key \"city\".", 2, r"\"city\"", axis="instruction_following"),
      kw("Includes the key \"temp_c\".", 2, r"\"temp_c\"", axis="instruction_following"),
      kw("Includes the key \"condition\".", 2, r"\"condition\"", axis="instruction_following"),
      kw("Names Lisbon.", 1, r"lisbon", axis="accuracy"),
      no_filler(-3)],
     [kw("Gives temp_c as a number, not a string.", 2, r"\"temp_c\"\s*:\s*-?\d"),
      rx("Pitfall: wraps the JSON in a markdown code fence.", -1, r"```", axis="instruction_following"),
      words_under(20)],
     "{\"city\": \"Lisbon\", \"temp_c\": 21, \"condition\": \"sunny\"}")

task("ins-title-two-sections", I,
     "Write about a good morning routine. Include a title in double angular brackets like <<title>>, and split the "
     "text into 2 sections marked SECTION 1 and SECTION 2.",
     [rule("Has a title in double angular brackets.", 3, "detectable_format:title"),
      rule("Has 2 sections marked SECTION 1 and SECTION 2.", 4, "detectable_format:multiple_sections",
           section_spliter="SECTION", num_sections=2),
      kw("Mentions the morning.", 1, r"morning", axis="accuracy"),
      kw("Gives a concrete habit (water, stretch, breakfast, plan, walk).", 2,
         r"(water|stretch|breakfast|plan|walk|light)", axis="completeness"),
      words_under(80)],
     [no_filler(),
      kw("Mentions waking at a consistent time.", 2, r"(same time|consistent|wake)"),
      kw("Mentions avoiding the phone first thing.", 1, r"(phone|screen|email)"),
      words_under(70)],
     "<<A Calm Morning>>\nSECTION 1\nWake at the same time each day, drink a glass of water and open the curtains for "
     "daylight. Stretch for five minutes.\nSECTION 2\nEat a simple breakfast and plan your top three tasks before "
     "looking at your phone.")

task("ins-all-caps-sign", I,
     "Write the text for a warning sign about a wet floor. Use only capital letters and fewer than 15 words.",
     [rule("Uses only capital letters.", 3, "change_case:all_capital"),
      words_under(15, 2),
      kw("Mentions the wet floor.", 3, r"wet", axis="accuracy"),
      kw("Mentions the floor.", 2, r"floor", axis="accuracy"),
      kw("Gives an action (caution, careful, slippery, watch your step).", 3, r"(caution|careful|slipp|watch)",
         axis="completeness"),
      no_filler()],
     [kw("Starts with CAUTION or WARNING.", 2, r"^\W*(caution|warning)"),
      words_under(10),
      kw("Uses the word SLIPPERY.", 1, r"slippery")],
     "CAUTION: WET FLOOR. SLIPPERY SURFACE. WATCH YOUR STEP.")

task("ins-picnic-postscript", I,
     "Write a short invitation to a picnic in the park on Saturday. At the end, add a postscript starting with P.S.",
     [rule("Includes a postscript starting with P.S.", 4, "detectable_content:postscript", postscript_marker="P.S."),
      kw("Mentions the picnic.", 1, r"picnic", axis="accuracy"),
      kw("Mentions Saturday.", 2, r"saturday", axis="accuracy"),
      kw("Gives a time.", 2, r"(\d ?(am|pm|a\.m\.|p\.m\.|o'clock)|noon|\d:\d\d)", axis="completeness"),
      words_under(70)],
     [no_filler(),
      kw("Asks guests to bring something.", 2, r"bring"),
      rule("The P.S. comes last (the response ends inside the postscript line).", 1, "keywords:regex_match",
           "instruction_following", pattern=r"P\.S\.[^\n]*\s*$"),
      words_under(60)],
     "You're invited to a picnic in Riverside Park this Saturday at noon! We'll have sandwiches, lemonade and "
     "games on the big lawn by the pond. Bring a blanket and your favourite snack.\n\nP.S. If it rains, we'll meet "
     "at my place instead.", heldout=True)

task("ins-four-money-bullets", I,
     "List exactly 4 tips for saving money. Use markdown bullet points such as '* tip'. No other text.",
     [rule("Has exactly 4 bullet points.", 4, "detectable_format:number_bullet_lists", num_bullets=4),
      kw("Mentions a budget.", 2, r"budget", axis="accuracy"),
      kw("Mentions cooking at home or cutting subscriptions or impulse buys.", 2,
         r"(cook|subscription|impulse|meal|coupon)", axis="accuracy"),
      words_under(60),
      no_filler()],
     [rx("Pitfall: adds an introduction or conclusion line.", -1, r"^(?![*-])[^\n]*\w[^\n]*\n[*-]",
         axis="instruction_following"),
      kw("Mentions automatic savings or an emergency fund.", 2, r"(automat|emergency fund|savings account)"),
      kw("Uses a number or percentage.", 1, r"\d"),
      words_under(45)],
     "* Set a monthly budget and track every expense.\n* Cook at home instead of ordering takeout.\n* Cancel "
     "subscriptions you rarely use.\n* Move 10% of each paycheck automatically into a savings account.")

task("ins-quoted-motto", I,
     "Write a one-sentence motto for a study group. Wrap the entire response in double quotation marks.",
     [rule("Wraps the whole response in double quotes.", 4, "startend:quotation"),
      rule("Is one sentence.", 2, "length_constraints:sentence_range", min_sentences=1, max_sentences=1),
      words_under(20, 2),
      kw("Mentions learning, study or together.", 2, r"(learn|study|together|know)", axis="accuracy"),
      no_filler()],
     [kw("Uses 'we' or 'together'.", 1, r"\b(we|together)\b"),
      words_under(12),
      kw("Mentions growth or progress.", 2, r"(grow|progress|rise|better)")],
     "\"Together we learn, and together we grow.\"")

task("ins-weekend-end-phrase", I,
     "Describe your ideal weekend in 3 sentences. End your response with the exact phrase 'Is there anything else I "
     "can help with?'",
     [rule("Ends with 'Is there anything else I can help with?'.", 4, "startend:end_checker",
           end_phrase="Is there anything else I can help with?"),
      rule("Has at most 4 sentences (3 plus the closing phrase).", 2, "length_constraints:sentence_range",
           max_sentences=4),
      kw("Mentions a weekend activity (hike, read, brunch, sleep in, friends).", 2,
         r"(hik|read|brunch|sleep|friend|beach|garden|cook|walk)", axis="accuracy"),
      words_under(70),
      no_filler()],
     [kw("Mentions both Saturday and Sunday.", 2, r"saturday", r"sunday"),
      kw("Includes a sensory detail (coffee, sun, rain, smell).", 1, r"(coffee|sun|rain|smell|warm)"),
      words_under(60)],
     "On Saturday I would sleep in, then hike to a lake with friends. On Sunday I would make a slow brunch with "
     "strong coffee. The evening would end with a good book on the porch. Is there anything else I can help with?")

task("ins-wheel-frequency", I,
     "Write a short paragraph about bicycles that uses the word 'wheel' at least 3 times.",
     [rule("Uses 'wheel' at least 3 times.", 4, "keywords:frequency", keyword="wheel", frequency=3,
           relation="at least"),
      kw("Mentions bicycles or bikes.", 1, r"(bicycle|bike)", axis="accuracy"),
      rule("Is a single paragraph.", 2, "length_constraints:paragraph_range", max_paragraphs=1),
      words_under(80),
      kw("Mentions pedals or a chain.", 2, r"(pedal|chain)", axis="accuracy")],
     [no_filler(),
      kw("Mentions a benefit (exercise, cheap, no fuel, health).", 2, r"(exercise|cheap|fuel|health|clean)"),
      rule("Uses 'wheel' as a whole word at least 3 times.", 1, "keywords:word_frequency", "instruction_following",
           keyword="wheel", frequency=3, relation="at least"),
      words_under(70)],
     "A bicycle turns your legs into motion: the pedals drive a chain, and the chain turns the back wheel. The front "
     "wheel steers, and each wheel spins on smooth bearings. It is cheap, clean exercise, and a good wheel will last "
     "for years.")

task("ins-two-goldfish-names", I,
     "Give two different names for a pet goldfish. Separate the two responses with six asterisks: ******",
     [rule("Gives exactly two different responses separated by ******.", 4, "combination:two_responses"),
      words_under(30, 2),
      kw("Mentions fish, water, gold or bubbles in a name.", 2, r"(fish|gold|bubble|fin|splash|sun)",
         axis="accuracy"),
      rx("Pitfall: lists more than two names (a numbered list or a third option).", -2, r"\b3\.|\bthird\b",
         axis="instruction_following")],
     [no_filler(),
      words_under(10),
      rule("Each response is a single line.", 2, "keywords:regex_match", "instruction_following",
           pattern=r"\s*[^\n*]+\s*\*{6}\s*[^\n*]+\s*", full_match=True),
      kw("Uses a pun or alliteration (Finn, Goldie, Bubbles).", 1, r"(finn|goldie|bubbles|sunny|nemo|flash)")],
     "Goldie\n******\nBubbles", heldout=True)

task("ins-offer-letter-template", I,
     "Write a short job offer letter template with at least 3 placeholders in square brackets, such as [name].",
     [rule("Has at least 3 square-bracket placeholders.", 4, "detectable_content:number_placeholders",
           num_placeholders=3),
      kw("Mentions the offer or position.", 2, r"(offer|position|role)", axis="accuracy"),
      kw("Includes a start date placeholder or mention.", 2, r"start", axis="completeness"),
      kw("Includes salary or compensation.", 2, r"(salary|compensation|pay)", axis="completeness"),
      words_under(80)],
     [no_filler(),
      kw("Asks the candidate to reply or sign by a deadline.", 2, r"(by \[|deadline|sign|reply|confirm)"),
      rule("Has at least 5 placeholders.", 1, "detectable_content:number_placeholders", "completeness",
           num_placeholders=5),
      words_under(70)],
     "Dear [Candidate Name],\n\nWe are pleased to offer you the position of [Job Title] at [Company], starting on "
     "[Start Date] with an annual salary of [Salary]. Please sign and return this letter by [Deadline] to confirm.\n\n"
     "Sincerely,\n[Manager Name]")

task("ins-tea-five-steps", I,
     "Explain how to make a cup of tea in exactly 5 numbered steps. No introduction.",
     [rule("Has exactly 5 numbered steps.", 4, "detectable_format:numbered_list", num_items=5),
      kw("Mentions boiling water.", 2, r"boil", axis="accuracy"),
      kw("Mentions steeping or brewing for a time.", 2, r"(steep|brew|minute)", axis="accuracy"),
      kw("Mentions the tea bag or leaves.", 1, r"(tea ?bag|leaves|leaf)", axis="accuracy"),
      words_under(70),
      no_filler(),
      rule("Starts directly with step 1.", 2, "keywords:regex_match", "instruction_following", pattern=r"^\s*1[.)]")],
     [kw("Gives a steeping time of 3 to 5 minutes.", 2, r"[3-5] minutes"),
      kw("Mentions milk, sugar or lemon as optional.", 1, r"(milk|sugar|lemon|honey)"),
      words_under(55)],
     "1. Boil fresh water in a kettle.\n2. Put a tea bag in your cup.\n3. Pour the hot water over it.\n4. Steep for "
     "3 to 5 minutes, then remove the bag.\n5. Add milk, sugar or lemon to taste.")

task("ins-zoo-letter-z", I,
     "Write two sentences about a visit to the zoo that use the letter 'z' at least 4 times in total.",
     [rule("Uses the letter z at least 4 times.", 4, "keywords:letter_frequency", letter="z", let_frequency=4,
           let_relation="at least"),
      kw("Mentions the zoo.", 1, r"zoo", axis="accuracy"),
      kw("Names an animal.", 2, r"(zebra|lion|monkey|elephant|giraffe|bear|penguin|tiger|lizard)", axis="accuracy"),
      rule("Is two sentences.", 2, "length_constraints:sentence_range", min_sentences=2, max_sentences=2)],
     [no_filler(),
      kw("Mentions a zebra.", 2, r"zebra"),
      words_under(35),
      rule("Uses the letter z at least 6 times.", 1, "keywords:letter_frequency", "instruction_following", letter="z",
           let_frequency=6, let_relation="at least")],
     "At the zoo we watched a zebra graze while lazy lizards dozed in the sun. A sizzling hot day made even the "
     "puzzled penguins seem dazed.")

task("ins-password-highlights", I,
     "Describe three features of a strong password. Highlight at least 2 key phrases with markdown, like *this*.",
     [rule("Has at least 2 markdown highlights.", 4, "detectable_format:number_highlighted_sections", num_highlights=2),
      kw("Mentions length (long, 12 or more characters).", 3, r"(long|length|1[2-6] characters|characters)",
         axis="accuracy"),
      kw("Mentions mixing character types (numbers, symbols, upper and lower case).", 3,
         r"(symbol|number|uppercase|upper and lower|mix)", axis="accuracy"),
      kw("Mentions uniqueness (not reused, unique per site).", 2, r"(unique|reuse|different|each site|each account)",
         axis="accuracy"),
      words_under(70),
      rx("Pitfall: recommends using personal information like a birthday or pet's name.", -3,
         r"(?<!avoid )(?<!not )(?<!never )(?<!no )\b(use|include) (your )?(birthday|pet'?s name|name)", axis="safety")],
     [no_filler(),
      kw("Recommends a password manager.", 2, r"password manager"),
      kw("Mentions a passphrase.", 1, r"passphrase"),
      words_under(60)],
     "A strong password is *long*, at least 12 characters, and a passphrase of random words works well. It should "
     "*mix character types*: upper and lower case, numbers and symbols. Finally, it must be *unique* to each "
     "account; a password manager can remember them for you.")

task("ins-repeat-then-answer", I,
     "First repeat the request below word for word without change, then give your answer. Do not say anything before "
     "repeating it. Request: What is the capital of Australia?",
     [rule("Starts by repeating the request word for word.", 4, "combination:repeat_prompt",
           prompt_to_repeat="What is the capital of Australia?"),
      kw("Answers Canberra.", 4, r"canberra", axis="accuracy"),
      words_under(40),
      rx("Pitfall: says Sydney is the capital.", -4, r"sydney is (the )?(capital|australia's capital)",
         axis="accuracy")],
     [no_filler(),
      kw("Adds a brief fact (chosen as a compromise between Sydney and Melbourne, or in the ACT).", 2,
         r"(compromise|melbourne|act\b|australian capital territory|1913)"),
      words_under(30)],
     "What is the capital of Australia? The capital of Australia is Canberra, chosen as a compromise between Sydney "
     "and Melbourne.", heldout=True)

task("ins-rain-divider", I,
     "Write 2 short paragraphs about rain. Separate the paragraphs with the markdown divider ***",
     [rule("Has exactly 2 paragraphs separated by ***.", 4, "length_constraints:number_paragraphs", num_paragraphs=2),
      kw("Mentions rain.", 1, r"rain", axis="accuracy"),
      words_under(80),
      kw("Includes a sensory detail (sound, smell, cool, grey, drops).", 2,
         r"(sound|smell|cool|grey|gray|drop|patter|petrichor)", axis="completeness"),
      llm("The two paragraphs have distinct focus.", 1, axis="style")],
     [no_filler(),
      kw("Mentions plants, rivers or the water cycle.", 2, r"(plant|river|cycle|garden|crop)"),
      kw("Uses the word 'petrichor'.", 1, r"petrichor"),
      words_under(60)],
     "Rain begins with a soft patter on the roof and the cool, earthy smell called petrichor.\n***\nBy evening the "
     "gardens are drinking deeply, and the river runs fuller, carrying the storm back toward the sea.")

task("ins-swim-second-paragraph", I,
     "Write 2 paragraphs about learning to swim, separated by a blank line. The second paragraph must start with the "
     "word 'Today'.",
     [rule("Has 2 paragraphs and the second starts with 'Today'.", 4, "length_constraints:nth_paragraph_first_word",
           num_paragraphs=2, nth_paragraph=2, first_word="Today"),
      rule("Has exactly 2 paragraphs separated by blank lines.", 2, "length_constraints:paragraph_range",
           min_paragraphs=2, max_paragraphs=2),
      kw("Mentions swimming.", 1, r"swim", axis="accuracy"),
      kw("Mentions fear or nervousness at first.", 2, r"(afraid|fear|nervous|scared)", axis="completeness"),
      words_under(80),
      no_filler()],
     [kw("Mentions a specific skill (floating, kicking, breathing).", 2, r"(float|kick|breath)"),
      kw("Mentions a teacher or coach.", 1, r"(teacher|coach|instructor)"),
      words_under(70)],
     "At first I was scared of the deep end. My coach taught me to float on my back and to breathe out slowly "
     "under the water.\n\nToday I swim two lengths without stopping, and kicking feels easy.")

task("ins-packing-headings", I,
     "Write a mini guide to packing for a weekend trip with at least 2 markdown headings (lines starting with ##).",
     [rule("Has at least 2 markdown headings.", 4, "detectable_format:number_headings", num_headings=2),
      kw("Mentions clothes.", 2, r"(cloth|shirt|jacket|layer|sock)", axis="accuracy"),
      kw("Mentions toiletries or a charger.", 2, r"(toiletr|toothbrush|charger|medicine)", axis="accuracy"),
      words_under(80)],
     [no_filler(),
      kw("Mentions checking the weather.", 2, r"weather"),
      kw("Mentions rolling clothes or a checklist.", 1, r"(roll|checklist|list)"),
      words_under(70)],
     "## Clothes\nCheck the weather, then pack two shirts, one warm layer, a rain jacket and spare socks. Roll "
     "them to save space.\n\n## Essentials\nToothbrush, toiletries, phone charger, any medicine and your ID.")

task("ins-sunset-word-range", I,
     "Describe a sunset in 20 to 40 words.",
     [rule("Is between 20 and 40 words.", 4, "length_constraints:word_range", min_words=20, max_words=40),
      kw("Mentions the sun or sky.", 1, r"(sun|sky)", axis="accuracy"),
      kw("Names a colour (orange, pink, purple, gold, red).", 2, r"(orange|pink|purple|gold|red|crimson|violet)",
         axis="accuracy"),
      kw("Mentions the horizon.", 2, r"horizon", axis="completeness"),
      llm("The description is vivid.", 1, axis="style"),
      rule("Pitfall: answers with a JSON object instead of prose.", -2, "detectable_format:json_format")],
     [rule("Has fewer than 4 sentences.", 1, "length_constraints:number_sentences", num_sentences=4,
           relation="less than"),
      no_filler(),
      kw("Names at least two colours.", 2, r"(orange|pink|purple|gold|red|crimson|violet).+"
         r"(orange|pink|purple|gold|red|crimson|violet)"),
      kw("Mentions darkness, stars or evening arriving.", 1, r"(dark|star|evening|night|dusk)"),
      words_under(35)],
     "The sun slips toward the horizon, spilling orange and gold across the water. Pink clouds fade to violet, and "
     "the first star appears as the evening cools.")

task("ins-train-delay-calm", I,
     "Write a calm announcement that the 8:15 train is delayed by 20 minutes. Do not use any exclamation marks or "
     "question marks.",
     [rule("Uses no exclamation marks or question marks.", 4, "punctuation:forbidden_characters", characters="!?"),
      kw("Gives the train time 8:15.", 2, r"8[:.]15", axis="accuracy"),
      kw("Gives the 20-minute delay.", 3, r"20 minutes", axis="accuracy"),
      kw("Apologises.", 2, r"(apolog|sorry|regret)", axis="communication"),
      words_under(50),
      no_filler()],
     [kw("Gives a reason or says updates will follow.", 2, r"(due to|because|update|signal|further)"),
      kw("Gives the new departure time 8:35.", 1, r"8[:.]35"),
      words_under(40)],
     "Attention please. The 8:15 train to Central is delayed by 20 minutes due to a signal fault and will now depart "
     "at 8:35. We apologise for the inconvenience and will share further updates here.", heldout=True)

task("ins-dinner-text", I,
     "Write a text message under 100 characters reminding a friend about dinner at 7 tonight.",
     [rule("Is under 100 characters.", 4, "length_constraints:number_characters", num_chars=100,
           relation="less than"),
      kw("Mentions dinner.", 1, r"dinner", axis="accuracy"),
      kw("Gives the time 7.", 3, r"\b7\b|seven", axis="accuracy"),
      kw("Mentions tonight.", 2, r"tonight", axis="accuracy")],
     [no_filler(),
      rule("Is under 60 characters.", 2, "length_constraints:number_characters", "instruction_following", num_chars=60,
           relation="less than"),
      kw("Names the place.", 1, r"\b(at|@) [A-Z]"),
      rule("Is a single line.", 1, "keywords:regex_match", "instruction_following", pattern=r"[^\n]+",
           full_match=True)],
     "Hey! Dinner tonight at 7 at Luigi's. See you there!")

task("ins-caps-slogan", I,
     "Write a two-sentence slogan for a running shoe that includes at least 2 words written entirely in CAPITAL "
     "letters.",
     [rule("Has at least 2 all-capital words.", 4, "change_case:capital_word_frequency", capital_frequency=2,
           capital_relation="at least"),
      rule("Is two sentences.", 2, "length_constraints:sentence_range", min_sentences=2, max_sentences=2),
      kw("Mentions running or speed.", 2, r"(run|speed|fast|mile|race|stride)", axis="accuracy"),
      words_under(30),
      no_filler()],
     [rule("Pitfall: writes the whole slogan in capitals.", -1, "keywords:regex_match", "instruction_following",
           pattern=r"^[^a-z]+$"),
      kw("Mentions comfort or cushioning.", 2, r"(comfort|cushion|light|soft)"),
      words_under(20),
      rule("Has at most 4 all-capital words.", 1, "change_case:capital_word_frequency", "style", capital_frequency=5,
           capital_relation="less than")],
     "Run FASTER than yesterday. Feather-light cushioning, ZERO excuses.")

task("ins-spanish-fruit", I,
     "Answer only in Spanish: what is your favourite fruit and why? Use one or two sentences.",
     [rule("Is written in Spanish.", 4, "language:response_language", language="es"),
      kw("Names a fruit in Spanish (manzana, mango, fresa, naranja, plátano, piña, uva).", 3,
         r"(manzana|mango|fresa|naranja|pl[aá]tano|pi[nñ]a|uva|sand[ií]a|pera|mel[oó]n)", axis="accuracy"),
      kw("Gives a reason (porque).", 2, r"porque", axis="completeness"),
      rule("Is one or two sentences.", 1, "length_constraints:sentence_range", min_sentences=1, max_sentences=2),
      rx("Pitfall: answers or adds a translation in English.", -2, r"\b(my favou?rite|because|fruit is)\b",
         axis="instruction_following")],
     [no_filler(),
      kw("Uses 'favorita' or 'favorito'.", 1, r"favorit[ao]"),
      kw("Describes taste (dulce, jugoso, refrescante).", 2, r"(dulce|jugos|refrescante|sabros|rico)"),
      words_under(30)],
     "Mi fruta favorita es el mango porque es dulce, jugoso y me recuerda al verano.")

task("ins-pacific-constrained", I,
     "Is the Pacific the largest ocean on Earth? Answer with one of these exact phrases: 'My answer is yes.', 'My "
     "answer is no.', 'My answer is maybe.'",
     [rule("Uses one of the allowed answer phrases.", 4, "detectable_format:constrained_response"),
      kw("Answers yes.", 4, r"my answer is yes", axis="accuracy"),
      words_under(15, 2),
      rx("Pitfall: answers no.", -4, r"my answer is no", axis="accuracy")],
     [no_filler(),
      rule("Is only the answer phrase.", 2, "keywords:regex_match", "instruction_following",
           pattern=r"My answer is yes\.", full_match=True),
      words_under(6)],
     "My answer is yes.")

task("ins-owls-three-sentences", I,
     "Write exactly 3 sentences about owls. Start your response with the word 'Owls'.",
     [rule("Starts with 'Owls'.", 3, "startend:start_checker", start_phrase="Owls"),
      rule("Is exactly 3 sentences.", 3, "length_constraints:sentence_range", min_sentences=3, max_sentences=3),
      kw("Mentions a true owl fact (nocturnal, turn heads, silent flight, hunt at night, pellets).", 3,
         r"(nocturnal|night|head|silent|quiet|pellet|hunt)", axis="accuracy"),
      words_under(60)],
     [no_filler(),
      kw("Mentions their prey (mice, rodents, insects).", 2, r"(mice|mouse|rodent|insect|vole|prey)"),
      kw("Gives a number (270 degrees, species count).", 1, r"\d"),
      words_under(50)],
     "Owls are nocturnal birds that hunt mice and other small prey at night. Special feathers let them fly almost "
     "silently. Many owls can turn their heads about 270 degrees.", heldout=True)

# ---------------------------------------------------------------------------------------------------- build


def _problems(rec) -> list[str]:
    """Rule-form criteria the reference gets wrong: a positive one it misses or a pitfall it triggers."""

    out, ref = [], rec["reference"]
    for item in rec["rubrics"] + rec["oracle_rubrics"]:
        tags = dict(t.split(":", 1) for t in item["tags"])
        if tags.get("verifier") != "rule":
            continue
        met = rules.check(tags["rule"], json.loads(tags.get("rule_kwargs", "{}")), ref)
        if met != (item["points"] > 0):
            out.append(f"{item['id']} ({'pitfall triggered' if met else 'missed'}): {item['criterion']}")
    return out

def main() -> int:
    problems = [p for rec, _ in TASKS for p in _problems(rec)]
    ids = [rec["id"] for rec, _ in TASKS]
    if len(set(ids)) != len(ids):
        problems.append("duplicate task ids")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    for split, held in (("train", False), ("heldout", True)):
        with open(os.path.join(HERE, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            for rec, h in TASKS:
                if h == held:
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"wrote {len(TASKS)} tasks")
    return 0

if __name__ == "__main__":
    sys.exit(main())
