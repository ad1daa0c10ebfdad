"""The greeting a voice is calibrated, warmed and timed with: what a voice agent says all day (a greeting and
an offer to help), one per language. Its first sentence sets a voice's decoder statistics
(``KokoroEngine.calibrate``); the whole of it warms each language's G2P and times the steady windows."""

from __future__ import annotations

CALIBRATION_TEXT = {
    "en-us": "Thanks for calling. I can help you with your order, your account, or anything else today.",
    "en-gb": "Thanks for calling. I can help you with your order, your account, or anything else today.",
    "es": "Gracias por llamar. Puedo ayudarle con su pedido, su cuenta o cualquier otra cosa hoy.",
    "fr-fr": "Merci de votre appel. Je peux vous aider avec votre commande, votre compte ou autre chose.",
    "hi": "कॉल करने के लिए धन्यवाद। मैं आज आपके ऑर्डर या खाते में आपकी मदद कर सकता हूँ।",
    "it": "Grazie per aver chiamato. Posso aiutarla con il suo ordine, il suo conto o altro oggi.",
    "ja": "おでんわ ありがとうございます。きょうは なにを おてつだい できますか。",  # kana, as first measured
    "pt-br": "Obrigado por ligar. Posso ajudar com o seu pedido, a sua conta ou qualquer outra coisa hoje.",
    "cmn": "感谢您的来电。今天我可以帮您处理订单。",
}


def calibration_text(lang: str) -> str:
    """The greeting a voice is calibrated, warmed and timed with in ``lang`` (English where none is set)."""
    return CALIBRATION_TEXT.get(lang, CALIBRATION_TEXT["en-us"])
