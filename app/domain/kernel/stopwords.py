"""Stopwords for query terms and for the fact/raw overlap check (English + Russian).

Kept in one frozen set: a query is often mixed-language, and a word that carries no
topic in one language never becomes a topic word by appearing next to the other.
"""

from __future__ import annotations

_ENGLISH = """
a about above after again against all also am an and any are aren as at be because
been before being below between both but by can cannot could couldn did didn do does
doesn doing don down during each either else ever every few for from further get gets
got had hadn has hasn have haven having he her here hers herself him himself his how
however i if in into is isn it its itself just let ll me might more most must mustn my
myself need no nor not now of off on once one only or other our ours ourselves out over
own please re same shall shan she should shouldn so some such than that the their
theirs them themselves then there these they this those through to too under until up
upon us ve very was wasn we were weren what when where whether which while who whom
whose why will with won would wouldn yes yet you your yours yourself yourselves
anything something nothing everything thing things lot lots really much many
""".split()

# Conversation glue that shows up in "what did we say about X" questions and names
# no topic of its own.
_RECALL_GLUE = """
remember recall discussed discuss mentioned mention earlier previously said say tell
told talked talk ago last time decided decide
помнишь помню обсуждали обсудили говорили сказал сказала упоминал упоминали раньше
ранее
""".split()

_RUSSIAN = """
а без более бы был была были было быть в вам вас весь во вот все всё всего всех вы где
да даже для до его ее её если есть еще ещё же за здесь и из или им их к как какой
какая какие когда кто ли либо мне может мы на над надо наш не него нее неё нет ни них
но ну о об однако он она они оно от очень по под при про с со так также такой там те
тем то того тоже той только том ты у уже хотя чего чей чем что чтобы чье чья эта эти
это этот я мой моя мои твой твоя свой своя себя себе был будет будут сейчас тут тоже
ещё вообще можно нужно нельзя этого этой этом этих нам них ему ей ему кого кому чём
какое каком всем всеми потом тогда где-то как-то почему зачем сам сама сами
""".split()

STOPWORDS: frozenset[str] = frozenset(_ENGLISH) | frozenset(_RUSSIAN) | frozenset(_RECALL_GLUE)
